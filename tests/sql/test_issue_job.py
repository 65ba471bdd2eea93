"""The job from the issue, parsed end to end."""
from sqlglot import exp

from weir.sql import WindowTVF, interval_micros, parse
from weir.sql import statements as st

from jobs import ISSUE_JOB

JOB = ISSUE_JOB


def test_statement_kinds_and_positions():
    statements = parse(JOB, "job.sql")
    assert [type(s) for s in statements] == [st.CreateTable, st.CreateTable, st.Insert, st.CreateView]
    assert [(s.line, s.col) for s in statements] == [(1, 1), (6, 1), (10, 1), (15, 1)]
    assert statements[2].text.startswith("INSERT INTO auction_counts\nSELECT")
    assert statements[2].text.endswith("GROUP BY auction, window_start, window_end")


def test_source_table():
    bids = parse(JOB)[0]
    assert bids.name == "bids"
    assert [c.name for c in bids.columns] == ["auction", "bidder", "price", "channel", "date_time"]
    assert bids.columns[4].type.sql() == "TIMESTAMP(3)"
    assert (bids.columns[4].line, bids.columns[4].col) == (2, 65)
    assert bids.watermark.column == "date_time"
    interval = bids.watermark.expression.find(exp.Interval)
    assert interval_micros(interval) == 2_000_000
    assert bids.options == {"connector": "filesystem", "path": "data/bids.parquet", "format": "parquet"}


def test_sink_table():
    sink = parse(JOB)[1]
    assert [c.name for c in sink.columns] == ["auction", "window_start", "window_end", "bids", "total", "top"]
    assert sink.watermark is None
    assert sink.options["path"] == "out/auction_counts" and sink.options["format"] == "csv"


def test_insert_and_view_windows():
    insert, view = parse(JOB)[2:]
    assert insert.table == "auction_counts" and insert.columns is None
    for statement, size in ((insert, 10_000_000), (view, 60_000_000)):
        window = statement.query.args["from_"].this
        assert isinstance(window, WindowTVF)
        assert (window.kind, window.this.name, window.args["time_col"].name) == ("TUMBLE", "bids", "date_time")
        assert interval_micros(window.args["size"]) == size
    assert view.name == "channel_minutes" and view.materialized
    assert [e.alias_or_name for e in view.query.expressions] == ["channel", "window_start", "window_end", "bids"]

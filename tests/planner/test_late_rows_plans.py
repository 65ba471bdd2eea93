"""Planning 'source.late-rows.table': which operators send late rows to the table, with which
columns, and the mistakes refused with the option they name."""
from __future__ import annotations

import pyarrow as pa
import pytest

from weir.engine.graph import LATE_ROWS_PORT
from weir.planner.planner import plan_script
from weir.sql import WeirSqlError, parse

SOURCE = """CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '100', 'source.late-rows.table' = '{table}');
"""
COUNTS = """CREATE MATERIALIZED VIEW counts AS SELECT auction, window_start, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE {relation}, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
"""


def plan(text: str):
    return plan_script(parse(text))


def test_the_window_sends_the_source_columns_to_one_sink():
    script = plan(SOURCE.format(table="late_bids") + COUNTS.format(relation="bids"))
    assert script.late_rows_tables == ["late_bids"]
    aggregate = script.graph.node("counts.window_aggregate")
    assert aggregate.config.late_rows == {"0": (("auction", '"auction"'), ("price", '"price"'),
                                                 ("date_time", '"date_time"'))}
    sink = script.graph.node("late_bids.sink")
    assert [(e.source, e.port) for e in sink.inputs] == [("counts.window_aggregate", LATE_ROWS_PORT)]
    assert sink.config.options["table-name"] == "late_bids"
    assert sink.output_schema.names == ["auction", "price", "date_time", "weir_operator", "weir_watermark"]
    assert sink.output_schema.field("weir_operator").type == pa.string()


def test_a_column_projected_away_before_the_window_is_null():
    view = "CREATE VIEW cheap AS SELECT auction, date_time FROM bids WHERE price < 10;\n"
    script = plan(SOURCE.format(table="late_bids") + view + COUNTS.format(relation="cheap"))
    projection = script.graph.node("counts.window_aggregate").config.late_rows["0"]
    assert projection[1] == ("price", "CAST(NULL AS BIGINT)")


def test_without_a_window_there_is_no_table():
    script = plan(SOURCE.format(table="late_bids") + "CREATE MATERIALIZED VIEW v AS SELECT auction FROM bids;")
    assert script.late_rows_tables == []
    assert all(n.kind != "sink" or n.id == "v.sink" for n in script.graph.nodes)


def test_the_table_name_must_be_free():
    with pytest.raises(WeirSqlError) as raised:
        plan(SOURCE.format(table="counts") + COUNTS.format(relation="bids"))
    (problem,) = raised.value.problems
    assert problem.message == "the late-rows table of `bids` is `counts`, which is already a table or view"
    option_line = SOURCE.splitlines()[2]
    assert (problem.line, problem.col) == (3, option_line.index("'source.late-rows.table'") + 1)


def test_session_windows_cannot_keep_late_rows():
    session = """CREATE MATERIALIZED VIEW s AS SELECT auction, window_start, COUNT(*) AS n
FROM TABLE(SESSION(TABLE bids PARTITION BY auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;"""
    with pytest.raises(WeirSqlError) as raised:
        plan(SOURCE.format(table="late_bids") + session)
    (problem,) = raised.value.problems
    assert "SESSION window of s.session_window cannot tell which rows were late" in problem.message
    assert "TUMBLE, HOP or CUMULATE" in problem.hint


def test_an_unknown_sibling_option_is_still_refused():
    text = SOURCE.format(table="late_bids").replace("'source.late-rows.table'", "'source.late-row.table'")
    with pytest.raises(WeirSqlError) as raised:
        plan(text + COUNTS.format(relation="bids"))
    assert "source.late-rows.table" in raised.value.problems[0].hint


def test_a_self_join_keeps_both_sides_late_rows_through_one_edge():
    join = """CREATE MATERIALIZED VIEW pairs AS SELECT L.auction, L.window_start
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) L
JOIN TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND)) R
ON L.auction = R.auction AND L.window_start = R.window_start AND L.window_end = R.window_end;"""
    script = plan(SOURCE.format(table="late_bids") + join)
    assert set(script.graph.node("pairs.window_join").config.late_rows) == {"0", "1"}
    assert [e.source for e in script.graph.node("late_bids.sink").inputs] == ["pairs.window_join"]

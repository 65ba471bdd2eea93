"""Live results from Python: con.stream's changes, leaving the loop stops the job, con.subscribe."""
from __future__ import annotations

import gc
import threading

import pyarrow as pa
import pytest

import weir
from weir.sql.errors import WeirSqlError

from api_data import NEXMARK, WINDOWS, bids_table


def job_threads(job) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"weir-job-{job.id}"]


def test_stream_yields_changes_with_their_row_kind(con):
    table = bids_table([(1, 10, 0), (2, 30, 1), (1, 20, 2), (1, 50, 3)])
    con.register("bids", iter(table.to_batches(max_chunksize=2)), watermark="date_time")
    stream = con.stream("SELECT auction, COUNT(*) AS bids, SUM(price) AS total FROM bids GROUP BY auction")
    assert stream.schema.names == ["op", "auction", "bids", "total"]
    changes = [tuple(row.values()) for batch in stream for row in batch.to_pylist()]
    # One change per key and batch: the second batch's two bids of auction 1 update it once.
    assert changes == [("+I", 1, 1, 10), ("+I", 2, 1, 30), ("-U", 1, 1, 10), ("+U", 1, 3, 80)]
    assert stream.job.status == "FINISHED"


def test_stream_of_an_append_only_query_is_all_inserts(con):
    con.register("bids", bids_table(), watermark="date_time")
    batches = list(con.stream("SELECT auction, price FROM bids WHERE price > 20"))
    rows = [tuple(row.values()) for row in pa.Table.from_batches(batches).to_pylist()]
    assert rows == [("+I", 2, 30), ("+I", 2, 40), ("+I", 1, 50), ("+I", 2, 60)]


def test_execute_of_a_streaming_select_is_a_stream(con):
    con.register("bids", bids_table(), watermark="date_time")
    stream = con.execute("SELECT auction, price FROM bids WHERE auction = 1")
    assert isinstance(stream, weir.shell.api.ChangeStream)
    assert [r["price"] for b in stream for r in b.to_pylist()] == [10, 20, 50]


def test_leaving_the_loop_stops_the_streams_job(con):
    con.execute(NEXMARK.format(events=""))  # unbounded
    for batch in con.stream("SELECT auction, price FROM bids"):
        assert batch.num_rows > 0
        break
    gc.collect()
    (job,) = [j for j in con.jobs() if j.name == "select"]
    assert job.status == "CANCELED"
    assert job_threads(job) == []


def test_closing_a_kept_stream_stops_its_job(con):
    con.execute(NEXMARK.format(events=""))
    with con.stream("SELECT auction FROM bids") as stream:
        assert next(stream).schema.names == ["op", "auction"]
        assert stream.job.status == "RUNNING"
    assert stream.job.status == "CANCELED" and job_threads(stream.job) == []
    assert list(stream) == []


def test_stream_of_a_committed_view_points_to_sql(con):
    con.register("bids", bids_table(), watermark="date_time")
    con.execute(WINDOWS).wait(60)
    with pytest.raises(WeirSqlError) as caught:
        con.stream("SELECT * FROM per_auction")
    assert "con.sql" in caught.value.hint


def test_subscribe_yields_a_views_committed_changes(con):
    """Applied in order, the changes leave the view's final rows, whenever the reads happened."""
    table = pa.Table.from_batches(bids_table().to_batches(max_chunksize=1))
    con.register("bids", table, watermark="date_time - INTERVAL '2' SECOND")
    con.execute("SET 'weir.checkpointing.interval-batches' = '1'")
    job = con.execute(WINDOWS)
    rows: dict[tuple, int] = {}
    kinds = set()
    for batch in con.subscribe("per_auction"):
        for change in batch.to_pylist():
            op = change.pop("op")
            kinds.add(op)
            key = tuple(change.values())
            rows[key] = rows.get(key, 0) + (1 if op == "+I" else -1)
    assert job.status == "FINISHED"
    final = con.sql("SELECT * FROM per_auction").fetchall()
    assert sorted(k for k, n in rows.items() for _ in range(n)) == sorted(final)
    assert len(final) == 5 and kinds <= {"+I", "-D"}


def test_subscribe_to_a_view_maintained_elsewhere_reads_its_committed_rows(con, tmp_path):
    con.register("bids", bids_table(), watermark="date_time")
    con.execute(WINDOWS).wait(60)
    with weir.connect(db=con.session.db_path, state_dir=tmp_path / "other") as other:
        with other.subscribe("per_auction", interval=0.05) as changes:
            first = next(changes)
            assert set(first.column("op").to_pylist()) == {"+I"}
            assert sorted(tuple(r.values())[1:] for r in first.to_pylist()) == \
                sorted(con.sql("SELECT * FROM per_auction").fetchall())
        assert list(changes) == []  # closed


def test_subscribe_to_an_unknown_view_names_the_tables(con):
    with pytest.raises(WeirSqlError, match="no materialized view `nowhere`"):
        con.subscribe("nowhere")

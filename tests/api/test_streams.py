"""Live results from Python: con.stream's changes, leaving the loop stops the job, con.subscribe."""
from __future__ import annotations

import gc
import itertools
import threading

import pyarrow as pa
import pytest

import weir
from weir.shell.api import _diff
from weir.shell.live import LiveResult, redirect_to
from weir.shell.render import cell
from weir.sql import parse
from weir.engine.errors import EngineError
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


def test_subscribe_to_a_view_whose_job_fails_raises_its_error_after_the_committed_changes(con):
    table = bids_table()
    good, bad = table.slice(0, 4), table.slice(4).drop_columns(["price"])
    con.register("bids", iter([*good.to_batches(max_chunksize=1), *bad.to_batches()]), watermark="date_time")
    con.execute("SET 'weir.checkpointing.interval-batches' = '1'")
    job = con.execute(WINDOWS)
    seen = []
    with pytest.raises(EngineError) as caught:
        for batch in con.subscribe("per_auction", interval=0.05):
            seen += batch.column("op").to_pylist()
    assert job.status == "FAILED" and caught.value is job.error
    assert caught.value.message.endswith("has no column price")
    assert set(seen) <= {"+I", "-D"}  # what was committed before the failure (maybe nothing), then the error


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


def replay(changes: list[dict], key: tuple[str, ...]) -> dict[tuple, dict]:
    """Apply keyed changes in order, checking each is consistent with what the key holds: +I for
    a new key, -U then at once +U for a changed one (the -U being the row it held), -D the row
    it held. The rows the key holds at the end."""
    rows: dict[tuple, dict] = {}
    pending = None
    for change in changes:
        change = dict(change)
        op = change.pop("op")
        k = tuple(change[c] for c in key)
        assert (pending is None) == (op != "+U"), f"{op} after {pending}"
        if op == "+I":
            assert k not in rows
            rows[k] = change
        elif op in ("-U", "-D"):
            assert rows.pop(k) == change
            pending = k if op == "-U" else None
        else:  # +U: the row the -U before it took back, now changed
            assert k == pending
            rows[k], pending = change, None
    assert pending is None
    return rows


UPDATING = [(1, 10, 0), (2, 30, 1), (1, 20, 2), (1, 50, 3), (3, 5, 4), (2, 15, 5)]


def subscribed(con, view: str) -> list[dict]:
    return [row for batch in con.subscribe(view) for row in batch.to_pylist()]


def test_subscribe_to_a_keyed_view_gives_updates_as_minus_u_plus_u(con):
    """A GROUP BY view, committed after every bid: its changes, applied in order, are consistent
    per key (replay) and end as the view's rows; a changed total shows as -U/+U, never -D/+I."""
    con.register("bids", pa.Table.from_batches(bids_table(UPDATING).to_batches(max_chunksize=1)), watermark="date_time")
    con.execute("SET 'weir.checkpointing.interval-batches' = '1'")
    con.execute("CREATE MATERIALIZED VIEW totals AS SELECT auction, COUNT(*) AS bids, SUM(price) AS total "
                "FROM bids GROUP BY auction")
    assert con.subscribe("totals").key == ("auction",)  # its sink's upsert key
    changes = subscribed(con, "totals")
    final = con.sql("SELECT * FROM totals").arrow().to_pylist()
    assert replay(changes, ("auction",)) == {(r["auction"],): r for r in final}
    assert {c["op"] for c in changes} <= {"+I", "-U", "+U"} and changes[0]["op"] == "+I"
    assert all(list(c) == ["op", "auction", "bids", "total"] for c in changes)  # rows, not the sink's changes
    assert len(final) == 3


def test_subscribe_shows_a_key_that_goes_as_minus_d(con):
    """Auctions per bid count: when auction 1 gets its second bid, the count 1 loses its only
    auction (-D of its row) — whichever commits the subscription saw, a key removed is -D."""
    con.register("bids", pa.Table.from_batches(bids_table(UPDATING[:2] + [(1, 20, 2)]).to_batches(max_chunksize=1)),
                 watermark="date_time")
    con.execute("SET 'weir.checkpointing.interval-batches' = '1'")
    con.execute("CREATE MATERIALIZED VIEW by_count AS SELECT bids, COUNT(*) AS auctions FROM "
                "(SELECT auction, COUNT(*) AS bids FROM bids GROUP BY auction) GROUP BY bids")
    assert con.subscribe("by_count").key == ("bids",)
    changes = subscribed(con, "by_count")
    final = con.sql("SELECT * FROM by_count ORDER BY bids").fetchall()
    assert final == [(1, 1), (2, 1)]  # auction 2 has one bid, auction 1 two
    assert replay(changes, ("bids",)) == {(b,): {"bids": b, "auctions": a} for b, a in final}


def test_diff_of_committed_tables_with_and_without_a_key():
    """The diff itself, over two fixed states: with a key, -U/+U per changed key, +I new, -D gone,
    each key's changes together in key order; without one, -D per row gone then +I per row come."""
    before = pa.table({"k": [1, 2, 3], "v": ["a", "b", "c"]})
    after = pa.table({"k": [1, 2, 4], "v": ["a", "B", "d"]})
    keyed = [tuple(r.values()) for r in _diff(before, after, ("k",)).to_pylist()]
    assert keyed == [("-U", 2, "b"), ("+U", 2, "B"), ("-D", 3, "c"), ("+I", 4, "d")]
    keyless = [tuple(r.values()) for r in _diff(before, after).to_pylist()]
    assert sorted(keyless[:2]) == [("-D", 2, "b"), ("-D", 3, "c")]
    assert sorted(keyless[2:]) == [("+I", 2, "B"), ("+I", 4, "d")]
    assert [tuple(r.values()) for r in _diff(None, before, ("k",)).to_pylist()] == [
        ("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")]


def test_stream_gives_the_changes_the_shells_changelog_mode_shows(con):
    """The same updating query, once as con.stream and once into the shell's live result (what
    its changelog mode draws): the same kinds (-U/+U for an update) and rows, in order."""
    con.register("bids", pa.Table.from_batches(bids_table(UPDATING).to_batches(max_chunksize=2)), watermark="date_time")
    query = "SELECT auction, COUNT(*) AS bids, MAX(price) AS top FROM bids GROUP BY auction"
    streamed = [[r.pop("op"), *map(cell, r.values())] for b in con.stream(query) for r in b.to_pylist()]
    graph = con.session.plan_select(parse(query)[0])
    sink = next(node for node in graph.nodes if node.kind == "sink")
    live = LiveResult(sink.output_schema)
    redirect_to(graph, live)
    assert con._handle(con.session.start(graph, "select")).wait(60) == "FINISHED"
    shown = live.changes(0, live.received)
    assert streamed == shown
    assert [c[0] for c in shown].count("-U") == [c[0] for c in shown].count("+U") > 0


def test_leaving_the_loop_over_an_endless_iterator_source_stops_its_job(con):
    """A generator that never ends is an unbounded source; breaking out of the stream's loop
    cancels the job, whose thread is then gone, and the generator is read no further."""
    read = []

    def endless():
        for second in itertools.count():
            read.append(second)
            yield bids_table([(second % 3, second, second)]).to_batches()[0]

    con.register("bids", endless(), schema=bids_table().schema, watermark="date_time")
    seen = []
    for batch in con.stream("SELECT auction, price FROM bids"):
        seen.extend(batch.column("price").to_pylist())
        if len(seen) >= 5:
            break
    gc.collect()
    (job,) = [j for j in con.jobs() if j.name == "select"]
    assert job.status == "CANCELED" and job_threads(job) == []
    assert seen[:5] == [0, 1, 2, 3, 4]

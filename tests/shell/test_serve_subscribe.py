"""SUBSCRIBE over the Postgres endpoint: a running job's committed changes, in order."""
from __future__ import annotations

import datetime as dt
import socket
import struct
import subprocess
import threading
import time

import duckdb
import psycopg
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import weir
from weir.shell import api
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.server import ServeOptions, Server

T0 = dt.datetime(2024, 1, 1)
#: (auction, price, seconds after T0): windows of 10 s close one after another as time goes on.
ROWS = [(1, 10, 0), (2, 20, 3), (1, 30, 11), (2, 40, 14), (1, 50, 22), (1, 60, 33), (2, 70, 44), (1, 80, 55)]
VIEW = """CREATE MATERIALIZED VIEW per_auction AS
SELECT auction, window_start, COUNT(*) AS bids, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end"""
#: An updating view: each commit replaces the rows of the auctions that had bids.
UPDATING = "CREATE MATERIALIZED VIEW per_auction AS SELECT auction, COUNT(*) AS bids, SUM(price) AS total " \
           "FROM bids GROUP BY auction"
SCHEMA = pa.schema([("auction", pa.int64()), ("price", pa.int64()), ("date_time", pa.timestamp("ms"))])


def batches(gate: threading.Event):
    """One bid per batch; after the first, wait for the test to open the gate."""
    for i, (auction, price, seconds) in enumerate(ROWS):
        if i == 1:
            assert gate.wait(60), "the subscription never started"
        yield pa.record_batch([[auction], [price], [T0 + dt.timedelta(seconds=seconds)]], schema=SCHEMA)


@pytest.fixture(params=[VIEW])
def running(tmp_path, request):
    """A job maintaining per_auction, held after its first bid, and a server over its connection."""
    con = weir.connect(str(tmp_path / "results.duckdb"), state_dir=tmp_path / "jobs")
    gate = threading.Event()
    con.register("bids", batches(gate), watermark="date_time", schema=SCHEMA)
    con.execute("SET 'weir.checkpointing.interval-batches' = '1'")
    job = con.execute(request.param)
    server = Server(con, ResultReader(con.session.db_path, beside_jobs=True), ServeOptions(port=0))
    server.start_in_thread()
    yield con, job, server, gate
    gate.set()
    server.stop()
    con.close()


def subscribing(server) -> bool:
    return any(client.subscription is not None for client in list(server.clients.values()))


def wait_until(condition, job, seconds: float = 60) -> None:
    """Probe ``condition`` while the job runs (never a sleep: each probe waits on the job)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert not job._job.done.wait(0.01), "the job ended first"
        assert time.monotonic() < deadline, "never came to pass"


@pytest.mark.parametrize("running, rows_at_end, kinds", [(VIEW, 8, {"+I"}), (UPDATING, 2, {"+I", "-U", "+U"})],
                         indirect=["running"])
def test_subscribe_streams_committed_changes_in_order(running, rows_at_end, kinds):
    con, job, server, gate = running
    rows: list[tuple] = []

    def read() -> None:
        with psycopg.connect(f"host=127.0.0.1 port={server.port} user=t dbname=weir", autocommit=True) as client:
            for row in client.cursor().stream("SUBSCRIBE TO per_auction"):
                rows.append(row)

    reader = threading.Thread(target=read)
    reader.start()
    wait_until(lambda: subscribing(server), job)
    gate.set()
    reader.join(120)
    assert not reader.is_alive() and job.status == "FINISHED"
    state: dict[tuple, int] = {}
    assert {row[1] for row in rows} == kinds
    for checkpoint, op, *values in rows:
        state[tuple(values)] = state.get(tuple(values), 0) + (1 if op in ("+I", "+U") else -1)
    final = con.sql("SELECT * FROM per_auction").fetchall()
    assert sorted(k for k, n in state.items() for _ in range(n)) == sorted(final) and len(final) == rows_at_end
    checkpoints = [row[0] for row in rows if row[0] is not None]
    assert checkpoints == sorted(checkpoints) and len(set(checkpoints)) > 1  # several commits, in order


def test_subscribe_to_a_query_and_copy_with_psql(running):
    con, job, server, gate = running
    gate.set()
    job.wait(120)
    with psycopg.connect(f"host=127.0.0.1 port={server.port} user=t dbname=weir", autocommit=True) as client:
        rows = list(client.cursor().stream("SUBSCRIBE (SELECT auction, sum(bids) AS bids FROM per_auction "
                                           "GROUP BY auction)"))
    assert sorted((op, auction, int(bids)) for _, op, auction, bids in rows) == [("+I", 1, 5), ("+I", 2, 3)]
    copied = subprocess.run(["/usr/bin/psql", "-h", "127.0.0.1", "-p", str(server.port), "-U", "t", "-d", "weir",
                             "-w", "-X", "-c", "COPY (SUBSCRIBE TO per_auction) TO STDOUT"],
                            capture_output=True, text=True, timeout=60)
    assert copied.returncode == 0, copied.stderr
    lines = [line.split("\t") for line in copied.stdout.splitlines()]
    assert len(lines) == 8 and {line[1] for line in lines} == {"+I"}
    assert sorted((int(a), w, int(n), int(t)) for _, _, a, w, n, t in lines) == \
        sorted((a, str(w), n, t) for a, w, n, t in con.sql("SELECT * FROM per_auction").fetchall())


def test_subscribe_to_an_unknown_view_is_an_error(running):
    _, _, server, _ = running
    with psycopg.connect(f"host=127.0.0.1 port={server.port} user=t dbname=weir", autocommit=True) as client:
        with pytest.raises(psycopg.errors.UndefinedTable):
            list(client.cursor().stream("SUBSCRIBE TO nowhere"))
        assert client.execute("SELECT count(*) FROM per_auction").fetchone()[0] >= 0


def test_a_cancelled_subscribe_ends_and_the_server_goes_on(running):
    _, job, server, _ = running
    client = psycopg.connect(f"host=127.0.0.1 port={server.port} user=t dbname=weir", autocommit=True)
    outcome: list = []

    def read() -> None:
        try:
            outcome.extend(client.cursor().stream("SUBSCRIBE TO per_auction"))
        except psycopg.Error as error:
            outcome.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    wait_until(lambda: subscribing(server), job)
    client.cancel_safe(timeout=30)  # a CancelRequest on a connection of its own, as psql's Ctrl-C
    reader.join(60)
    assert not reader.is_alive() and isinstance(outcome[-1], psycopg.errors.QueryCanceled)
    assert client.execute("SELECT count(*) FROM per_auction").fetchone()[0] >= 0
    assert job.status == "RUNNING"  # the job is not the subscription's: it goes on
    client.close()


def test_a_client_that_hangs_up_mid_subscribe_is_let_go(running):
    _, job, server, _ = running
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    params = b"user\x00t\x00database\x00weir\x00\x00"
    sock.sendall(struct.pack("!ii", len(params) + 8, 196608) + params)
    query = b"SUBSCRIBE TO per_auction\x00"
    sock.sendall(b"Q" + struct.pack("!i", len(query) + 4) + query)
    wait_until(lambda: subscribing(server), job)
    sock.close()
    wait_until(lambda: not server.clients, job)  # its connection is gone, and with it the subscription
    with psycopg.connect(f"host=127.0.0.1 port={server.port} user=t dbname=weir", autocommit=True) as client:
        assert client.execute("SELECT 1").fetchone() == (1,)
    assert job.status == "RUNNING"


def test_subscribe_to_a_table_another_process_publishes(tmp_path):
    """No job of this process writes the table (as for `weir serve` beside a `weir run`): each
    snapshot published over the file reaches the subscriber as its changes, in order; a
    snapshot that changes no row sends nothing."""
    from weir.engine.connectors.duckdb_snapshot import publisher_for

    db = str(tmp_path / "results.duckdb")
    with publisher_for(db).change(10) as change:
        change.execute("CREATE TABLE counts AS SELECT 1 AS k, 10 AS n")
    con = weir.connect(db, state_dir=tmp_path / "jobs")
    server = Server(con, ResultReader(db, beside_jobs=False), ServeOptions(port=0))
    server.start_in_thread()
    steps = ["INSERT INTO counts VALUES (2, 20)", "DELETE FROM counts WHERE k = 1", "INSERT INTO counts VALUES (3, 30)"]
    seen = []
    try:
        with psycopg.connect(f"host=127.0.0.1 port={server.port} user=t dbname=weir", autocommit=True) as client:
            for row in client.cursor().stream("SUBSCRIBE TO counts"):
                assert row[0] is None  # no job here: no checkpoint to name
                seen.append(row[1:])
                if not steps:
                    break
                for step in ("UPDATE counts SET n = n WHERE false", steps.pop(0)):  # one publish each
                    with publisher_for(db).change(10) as change:
                        change.execute(step)
    finally:
        server.stop()
        con.close()
    assert seen == [("+I", 1, 10), ("+I", 2, 20), ("-D", 1, 10), ("+I", 3, 30)]


_CELLS = st.one_of(st.none(), st.integers(-3, 3))
_ROWS = st.lists(st.tuples(_CELLS, _CELLS, st.one_of(st.none(), st.sampled_from(["a", "b", ""]))), max_size=8)


def _table(rows) -> pa.Table:
    return pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "n": pa.array([r[1] for r in rows], pa.int64()),
                     "s": pa.array([r[2] for r in rows], pa.string())})


def _changes(batch) -> list[tuple]:
    return [tuple(r.values()) for r in batch.to_pylist()]


_DUCKDB = duckdb.connect(":memory:")


@settings(max_examples=100, deadline=None)
@given(before=_ROWS, after=_ROWS, keyed=st.booleans())
def test_the_arrow_diff_gives_what_duckdb_gives(before, after, keyed):
    """SUBSCRIBE's diff in pyarrow (``_arrow_diff``) against the same diff by DuckDB's EXCEPT ALL
    (``_duckdb_diff``): NULLs equal, duplicates counted; with a key (one row per key, NULL a key
    too) -U/+U of a changed key, in key order; without one every -D before every +I."""
    if keyed:  # an upsert key: one row per key on each side
        before = list({r[0]: r for r in before}.values())
        after = list({r[0]: r for r in after}.values())
    key = ("k",) if keyed else None
    old, new = _table(before), _table(after)
    fast, slow = _changes(api._arrow_diff(old, new, key)), _changes(api._duckdb_diff(old, new, key, _DUCKDB))
    if keyed:
        assert fast == slow
    else:
        kinds = [c[0] for c in fast]
        assert kinds == sorted(kinds, key=lambda kind: kind != "-D")
        assert sorted(fast, key=repr) == sorted(slow, key=repr)

"""Readers of the results database never block a job (``duckdb_snapshot.py``).

A reader in another process holds the file open read-only for the whole of a job that commits a
checkpoint after every batch: no commit waits for a lock, the job's output is exact, and the
reader sees one complete checkpoint of both tables (the same one, however long it holds it)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import duckdb
import pyarrow as pa
import pytest

import weir
from weir.engine.connectors.duckdb_snapshot import open_snapshot, publisher_for
from weir.engine.connectors.registry import create_sink

BATCHES = 24
ROWS = 20
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])

#: Opens the database read-only (as the DuckDB CLI with -readonly does), prints what it sees,
#: and holds it until told twice: the second print must equal the first.
READER = """
import duckdb, json, sys
connection = duckdb.connect(sys.argv[1], read_only=True)
def seen():
    rows = connection.execute("SELECT count(*), coalesce(sum(v), 0) FROM all_rows").fetchone()
    per_key = connection.execute("SELECT k, n, total FROM per_key ORDER BY k").fetchall()
    grouped = connection.execute("SELECT k, count(*), sum(v) FROM all_rows GROUP BY k ORDER BY k").fetchall()
    return {"rows": list(rows), "per_key": [list(r) for r in per_key], "grouped": [list(r) for r in grouped]}
print(json.dumps(seen()), flush=True)
sys.stdin.readline()
print(json.dumps(seen()), flush=True)
sys.stdin.readline()
"""

JOB = """
SET 'weir.checkpointing.interval-batches' = '1';
CREATE TABLE all_rows (k BIGINT, v BIGINT) WITH ('connector' = 'duckdb', 'path' = '{db}', 'table-name' = 'all_rows');
INSERT INTO all_rows SELECT k, v FROM src;
CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS n, SUM(v) AS total FROM src GROUP BY k;
"""


def batch(i: int) -> pa.RecordBatch:
    rows = range(i * ROWS, (i + 1) * ROWS)
    return pa.record_batch([pa.array([r % 7 for r in rows], pa.int64()), pa.array(list(rows), pa.int64())],
                           schema=SCHEMA)


def test_a_reader_held_open_in_another_process_for_a_whole_job_delays_no_commit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "results.duckdb")
    publisher = publisher_for(db)
    reader_ready, paused = threading.Event(), threading.Event()
    published_while_held: list[int] = []

    def source():
        """The job's input; it pauses once a checkpoint with rows is published, until the reader
        holds the file, so that every later commit happens while it is held."""
        for i in range(BATCHES):
            if not paused.is_set() and _published_rows(db):
                paused.set()
                assert reader_ready.wait(120), "the reader never opened the database"
                published_while_held.append(publisher.published)
            yield batch(i)
        published_while_held.append(publisher.published)

    con = weir.connect(db=db, state_dir=tmp_path / "jobs")
    try:
        con.register("src", source(), schema=SCHEMA)
        waits = publisher.lock_waits
        job = con.submit(JOB.format(db=db))
        assert paused.wait(120), "no checkpoint with rows was published"
        reader = subprocess.Popen([sys.executable, "-c", READER, db], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            first = json.loads(reader.stdout.readline())
            # The job waits for reader_ready, so nothing is committed meanwhile: the API's SELECT
            # (the shell's read path) answers now, from the same latest snapshot.
            assert con.sql("SELECT k, n, total FROM per_key ORDER BY k").arrow().to_pylist() == \
                [{"k": k, "n": n, "total": total} for k, n, total in first["per_key"]]
            reader_ready.set()
            assert job.wait(120) == "FINISHED"
            reader.stdin.write("\n")
            reader.stdin.flush()
            again = json.loads(reader.stdout.readline())
        finally:
            reader_ready.set()
            reader.communicate("\n")
        assert publisher.lock_waits == waits  # no commit waited for a lock
        assert published_while_held[-1] - published_while_held[0] >= 2  # commits went on meanwhile
        # The held reader saw one complete checkpoint: both tables of the same one, and kept it.
        assert 0 < first["rows"][0] < BATCHES * ROWS and first["rows"][0] % ROWS == 0
        assert first["per_key"] == first["grouped"]
        assert again == first
        # The job's output is exact.
        everything = pa.Table.from_batches([batch(i) for i in range(BATCHES)])
        oracle = duckdb.connect().sql("SELECT k, count(*), sum(v) FROM everything GROUP BY k ORDER BY k").fetchall()
        with open_snapshot(db) as latest:
            assert latest.execute("SELECT count(*), sum(v) FROM all_rows").fetchone() == \
                (BATCHES * ROWS, sum(range(BATCHES * ROWS)))
            assert latest.execute("SELECT k, n, total FROM per_key ORDER BY k").fetchall() == oracle
    finally:
        con.close()
    assert not list(tmp_path.glob("results.duckdb.weir-next-*"))


def _published_rows(db: str) -> int:
    try:
        with open_snapshot(db) as snapshot:
            return snapshot.execute("SELECT count(*) FROM all_rows").fetchone()[0]
    except duckdb.Error:  # not created yet
        return 0


def duckdb_sink(db, table, job="job"):
    sink = create_sink({"connector": "duckdb", "path": str(db), "table-name": table}, SCHEMA)
    sink.job = job
    sink.open()
    return sink


def counts(db) -> tuple[int, int]:
    with open_snapshot(str(db)) as snapshot:
        return tuple(snapshot.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("a", "b"))


def test_one_checkpoint_of_two_tables_is_published_as_one_snapshot(tmp_path):
    """A reader opening between two sinks' commits of a checkpoint sees neither (never part of it)."""
    db = tmp_path / "out.duckdb"
    a, b = duckdb_sink(db, "a"), duckdb_sink(db, "b")
    for checkpoint_id in (1, 2):
        a.write(batch(checkpoint_id))
        b.write(batch(checkpoint_id))
        a.pre_commit(checkpoint_id)
        b.pre_commit(checkpoint_id)
        before = counts(db)
        a.commit(checkpoint_id)
        assert counts(db) == before  # a's rows wait for b's commit of the same checkpoint
        b.commit(checkpoint_id)
        assert counts(db) == (checkpoint_id * ROWS, checkpoint_id * ROWS)
    # A sink with nothing to commit still completes its checkpoint.
    a.write(batch(3))
    a.pre_commit(3)
    b.pre_commit(3)
    a.commit(3)
    assert counts(db) == (2 * ROWS, 2 * ROWS)
    b.commit(3)
    assert counts(db) == (3 * ROWS, 2 * ROWS)
    # A member that ends (its job failed: abort) does not hold the others' commits back.
    a.write(batch(4))
    a.pre_commit(4)
    b.pre_commit(4)
    a.commit(4)
    b.abort()
    assert counts(db) == (4 * ROWS, 2 * ROWS)


@pytest.mark.parametrize("kill_at", ["publish", "published"])
def test_a_writer_killed_while_publishing_leaves_the_last_snapshot_and_its_restart_commits_once(tmp_path, kill_at):
    """SIGKILL after the next snapshot is written but before the rename (readers keep the old
    one), or after the rename but before the staged files go: recovery commits exactly once."""
    db = tmp_path / "out.duckdb"
    script = f"""
import pyarrow as pa
from weir.engine.connectors.registry import create_sink
schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
sink = create_sink({{"connector": "duckdb", "path": {str(db)!r}, "table-name": "a"}}, schema)
sink.open()
for checkpoint_id in (1, 2):
    sink.write(pa.record_batch([pa.array([checkpoint_id] * 3), pa.array([1, 2, 3])], schema=schema))
    print(sink.pre_commit(checkpoint_id)[0], flush=True)
    sink.commit(checkpoint_id)
"""
    # Publishes: 1 creates the table, 2 commits checkpoint 1, 3 commits checkpoint 2 (killed).
    env = {**os.environ, "WEIR_FAULT": f"{kill_at}:3"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == -9, done.stderr
    staged = done.stdout.split()
    with open_snapshot(str(db)) as snapshot:  # a complete snapshot: checkpoint 1, or 1 and 2
        seen = snapshot.execute("SELECT k, count(*) FROM a GROUP BY k ORDER BY k").fetchall()
    assert seen == ([(1, 3)] if kill_at == "publish" else [(1, 3), (2, 3)])
    sink = create_sink({"connector": "duckdb", "path": str(db), "table-name": "a"}, SCHEMA)
    sink.recover([[staged[1]]], checkpoint_id=2)  # the restart: checkpoint 2's staged file
    sink.open(resuming=True)
    with open_snapshot(str(db)) as snapshot:
        assert snapshot.execute("SELECT k, count(*) FROM a GROUP BY k ORDER BY k").fetchall() == [(1, 3), (2, 3)]
    assert not list(tmp_path.glob("out.duckdb.weir-next-*")) and not list((tmp_path / "out.duckdb.staging").iterdir())


def test_latest_results_cursors_see_the_snapshot_that_was_latest_when_made(tmp_path):
    """``shell.database.LatestResults``: what the shell and a server read through."""
    from weir.shell.database import LatestResults

    db = tmp_path / "out.duckdb"
    latest = LatestResults(str(db))
    assert latest.cursor().execute("SELECT 42").fetchall() == [(42,)]  # no file yet: an empty database
    sink = duckdb_sink(db, "a")
    sink.write(batch(0))
    sink.pre_commit(1)
    sink.commit(1)
    old = latest.cursor()
    same = latest.cursor()
    assert old.execute("SELECT count(*) FROM a").fetchall() == [(ROWS,)]
    sink.write(batch(1))
    sink.pre_commit(2)
    sink.commit(2)
    new = latest.cursor()
    assert new.execute("SELECT count(*) FROM a").fetchall() == [(2 * ROWS,)]
    assert old.execute("SELECT count(*) FROM a").fetchall() == [(ROWS,)]  # its snapshot, still whole
    assert same.execute("SELECT current_database()").fetchall() == [("out",)]


def test_a_notebook_holding_the_database_read_write_in_this_process_does_not_stop_readers(tmp_path):
    """DuckDB refuses one process an ATTACH of a path it has open read-write; snapshots are
    attached through a hard link, so `weir.connect().sql` works beside a notebook's connection."""
    db = tmp_path / "out.duckdb"
    sink = duckdb_sink(db, "a")
    sink.write(batch(0))
    sink.finish()
    notebook = duckdb.connect(str(db))
    try:
        with open_snapshot(str(db)) as snapshot:
            assert snapshot.execute("SELECT count(*) FROM a").fetchall() == [(ROWS,)]
    finally:
        notebook.close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out.duckdb.weir-reader")) == []

"""The print, blackhole and duckdb sinks."""
import subprocess
import sys

import duckdb
import pyarrow as pa
import pytest

from weir.engine.connectors.registry import create_sink
from weir.engine.errors import EngineError

SCHEMA = pa.schema([("auction", pa.int64()), ("window_end", pa.timestamp("us")), ("bids", pa.int64())])


def rows(first=1001, n=2):
    return pa.record_batch([
        pa.array([first + i for i in range(n)], pa.int64()),
        pa.array([1_704_067_200_000_000 + i * 500_000 for i in range(n)], pa.timestamp("us")),
        pa.array([3 if i == 0 else None for i in range(n)], pa.int64()),
    ], schema=SCHEMA)


def test_print_writes_rows_as_flink_does(capsys):
    sink = create_sink({"connector": "print"}, SCHEMA)
    sink.open()
    sink.write(rows())
    sink.finish()
    assert capsys.readouterr().out == "+I[1001, 2024-01-01 00:00:00, 3]\n+I[1002, 2024-01-01 00:00:00.500, null]\n"
    assert sink.transactional is False


def test_print_identifier_prefixes_every_line(capsys):
    sink = create_sink({"connector": "print", "print-identifier": "bids"}, SCHEMA)
    sink.write(rows())
    assert capsys.readouterr().out.splitlines() == [
        "bids> +I[1001, 2024-01-01 00:00:00, 3]", "bids> +I[1002, 2024-01-01 00:00:00.500, null]"]


def test_blackhole_discards(capsys):
    sink = create_sink({"connector": "blackhole"}, SCHEMA)
    sink.open()
    sink.write(rows())
    sink.finish()
    assert sink.transactional is False and capsys.readouterr().out == ""


def duckdb_sink(path, **options):
    sink = create_sink({"connector": "duckdb", "path": str(path), "table-name": "results", **options}, SCHEMA)
    sink.open()
    return sink


def read_only(path, query="SELECT auction FROM results ORDER BY auction"):
    with duckdb.connect(str(path), read_only=True) as connection:
        return [r[0] for r in connection.execute(query).fetchall()]


def test_duckdb_commit_is_visible_to_a_reader_after_commit_and_nothing_before(tmp_path):
    db = tmp_path / "out.db"
    sink = duckdb_sink(db)
    assert read_only(db) == []  # the table exists, empty, from open()
    sink.write(rows(1001))
    handle = sink.pre_commit(1)
    assert read_only(db) == []
    sink.write(rows(2001))  # after the barrier: belongs to checkpoint 2
    sink.commit(1, handle)
    assert read_only(db) == [1001, 1002]
    sink.finish()
    assert read_only(db) == [1001, 1002, 2001, 2002]
    with duckdb.connect(str(db), read_only=True) as connection:
        assert connection.execute("SELECT window_end, bids FROM results LIMIT 1").fetchall()[0][1] == 3
        assert str(connection.execute("DESCRIBE results").fetchall()[1][1]) == "TIMESTAMP"


def test_duckdb_commit_twice_inserts_once(tmp_path):
    db = tmp_path / "out.db"
    sink = duckdb_sink(db)
    sink.write(rows())
    handle = sink.pre_commit(1)
    sink.commit(1, handle)
    restored = duckdb_sink(db)  # a restored job commits its checkpoint's handle again
    restored.commit(1, handle)
    assert read_only(db) == [1001, 1002]


def test_duckdb_abort_discards_staged_rows(tmp_path):
    db = tmp_path / "out.db"
    sink = duckdb_sink(db)
    sink.write(rows())
    handle = sink.pre_commit(1)
    sink.write(rows(3001))
    sink.abort()
    sink.finish()
    assert read_only(db) == []
    # The pre-committed file may belong to a completed checkpoint: it stays until recovery.
    assert [str(p) for p in (tmp_path / "out.db.staging").iterdir()] == handle
    duckdb_sink(db).recover([])
    assert list((tmp_path / "out.db.staging").iterdir()) == []


def test_duckdb_append_and_replace_modes(tmp_path):
    db = tmp_path / "out.db"
    for _ in range(2):
        sink = duckdb_sink(db)
        sink.write(rows())
        sink.finish()
    assert read_only(db) == [1001, 1001, 1002, 1002]
    sink = duckdb_sink(db, **{"sink.mode": "replace"})
    assert read_only(db) == [1001, 1001, 1002, 1002]  # the old result stays until the first commit
    sink.write(rows(5))
    sink.finish()
    assert read_only(db) == [5, 6]


def test_duckdb_replace_with_no_rows_empties_the_table_and_a_failed_job_keeps_it(tmp_path):
    db = tmp_path / "out.db"
    sink = duckdb_sink(db)
    sink.write(rows())
    sink.finish()
    failed = duckdb_sink(db, **{"sink.mode": "replace"})
    failed.write(rows(7))
    failed.abort()  # the job failed before committing
    assert read_only(db) == [1001, 1002]
    empty = duckdb_sink(db, **{"sink.mode": "replace"})
    empty.finish()  # a job whose result is empty
    assert read_only(db) == []


HOLDER = """
import duckdb, sys
connection = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
print(connection.execute("SELECT count(*) FROM results").fetchone()[0], flush=True)
sys.stdin.readline()
print(connection.execute("SELECT count(*) FROM results").fetchone()[0], flush=True)
sys.stdin.readline()
"""


@pytest.mark.parametrize("mode", ["ro", "rw"])
def test_a_reader_holding_the_file_in_another_process_never_delays_a_commit(tmp_path, mode):
    """A read-only reader (DuckDB's shared lock) or a read-write one (the DuckDB CLI's default,
    an exclusive lock) keeps the snapshot it opened; the sink publishes past it without waiting."""
    db = tmp_path / "out.db"
    sink = duckdb_sink(db, **{"sink.lock-timeout": "0s"})  # any wait for a lock would fail the commit
    sink.write(rows())
    sink.pre_commit(1)
    sink.commit(1)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), mode],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "2"
        waits = sink.publisher.lock_waits
        sink.write(rows(2001, 3))
        sink.pre_commit(2)
        sink.commit(2)
        sink.write(rows(3001, 1))
        sink.finish()
        assert sink.publisher.lock_waits == waits  # no commit waited
        assert read_only(db) == [1001, 1002, 2001, 2002, 2003, 3001]  # a new reader sees the latest
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "2"  # the held reader still sees its snapshot
    finally:
        holder.communicate("\n")
    assert not list(tmp_path.glob("out.db.weir-next-*"))


def test_duckdb_file_open_read_only_in_this_process(tmp_path):
    db = tmp_path / "out.db"
    sink = duckdb_sink(db, **{"sink.lock-timeout": "0s"})
    sink.write(rows())
    holder = duckdb.connect(str(db), read_only=True)  # same process, another configuration: no matter
    try:
        sink.finish()
        assert [r[0] for r in holder.execute("SELECT auction FROM results").fetchall()] == []
    finally:
        holder.close()
    assert read_only(db) == [1001, 1002]


def test_another_writers_publish_makes_a_commit_wait_and_then_fail_clearly(tmp_path):
    """Only a writer's publish makes a commit wait: a process holding the publish lock longer than
    'sink.lock-timeout' fails the commit with an error naming the lock; the rows stay staged."""
    db = tmp_path / "out.db"
    sink = duckdb_sink(db, **{"sink.lock-timeout": "200ms"})
    sink.write(rows())
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('locked', flush=True); sys.stdin.readline()", f"{db}.weir-lock"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(EngineError, match="another process has been publishing") as error:
            sink.finish()
        assert "sink.lock-timeout" in error.value.hint
        assert read_only(db) == []
    finally:
        holder.communicate("\n")
    sink.finish()  # staged rows were kept: the next commit succeeds
    assert read_only(db) == [1001, 1002]


def test_print_renders_nested_values(capsys):
    schema = pa.schema([("tags", pa.list_(pa.string())), ("ok", pa.bool_())])
    sink = create_sink({"connector": "print"}, schema)
    sink.write(pa.record_batch([pa.array([["a", "b"], None]), pa.array([True, None])], schema=schema))
    assert capsys.readouterr().out == "+I[['a', 'b'], true]\n+I[null, null]\n"


def test_print_sink_writes_doubles_as_java_does():
    from weir.engine.connectors.text_format import float_text

    values = pa.array([200.0, 3.5, 1e20, -2.0, 1.5e-7, None, float("nan"), float("-inf")])
    assert float_text(values).to_pylist() == ["200.0", "3.5", "1.0E20", "-2.0", "1.5E-7", None, "NaN", "-Infinity"]


def test_changes_a_killed_outside_writer_left_in_the_wal_are_kept_by_the_next_commit(tmp_path):
    """The published file is copied for each commit; a WAL beside it (a DuckDB process wrote to
    the file and died before checkpointing) is checkpointed into it first, not dropped."""
    db = tmp_path / "out.db"
    sink = duckdb_sink(db)
    killed = subprocess.run(
        [sys.executable, "-c", "import duckdb, os, signal, sys; c = duckdb.connect(sys.argv[1]); "
         "c.execute('CREATE TABLE outside AS SELECT 42 AS answer'); os.kill(os.getpid(), signal.SIGKILL)", str(db)])
    assert killed.returncode == -9 and (tmp_path / "out.db.wal").exists()
    sink.write(rows())
    sink.finish()
    assert read_only(db) == [1001, 1002]
    assert read_only(db, "SELECT answer FROM outside") == [42]
    assert not (tmp_path / "out.db.wal").exists()

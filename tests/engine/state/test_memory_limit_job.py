"""A job whose window state is larger than its memory completes under a memory cgroup at the
default settings, its state spilled to the state directory, with the output of DuckDB's batch
query: managed memory leaves room for Python under the cgroup's limit, and what leaves DuckDB
(the firing's output, the sink's rows) does so in bounded batches."""
from __future__ import annotations

import sys
from pathlib import Path

import duckdb
import pytest

from tests.support.cgroup import memory_cgroup, run_in, unavailable_reason
from weir.engine.state.memory import MIN_CONNECTION_BYTES, managed_memory_bytes

MB = 1 << 20
#: The cgroup's limit: the interpreter and its libraries take ~190 MB of it while a job runs.
CGROUP_LIMIT = 320 * MB
#: What DuckDB may use by default under that limit: 0.4 of what is left, at least 64 MB.
MANAGED = max(MIN_CONNECTION_BYTES, managed_memory_bytes({}, total=CGROUP_LIMIT))
KEYS = 540_000
KEY_CHARS = 128

JOB = """
CREATE TABLE events (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'events.parquet', 'format' = 'parquet');
CREATE TABLE totals (k VARCHAR, n BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'parquet');
INSERT INTO totals SELECT k, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY k, window_start, window_end;
"""


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"no memory cgroup here: {unavailable_reason()}")
def test_window_state_beyond_managed_memory_spills_and_completes_in_a_cgroup_by_default(tmp_path):
    # Long keys, each in its own window, all open until the input ends: the keys alone are
    # larger than DuckDB's memory, and the one firing at the end, held whole as Arrow, would not
    # fit beside the interpreter and DuckDB in the cgroup.
    duckdb.sql(f"""COPY (SELECT repeat(md5(i::VARCHAR), {KEY_CHARS // 32}) AS k, i AS v,
                          TIMESTAMP '2024-01-01' + to_microseconds((i // 100)::BIGINT) AS ts
                        FROM range({KEYS}) t(i)) TO '{tmp_path / "events.parquet"}' (FORMAT parquet)""")
    (key_bytes,) = duckdb.sql(f"SELECT sum(strlen(k)) FROM '{tmp_path / 'events.parquet'}'").fetchall()[0]
    assert key_bytes > MANAGED == MIN_CONNECTION_BYTES
    (tmp_path / "job.sql").write_text(JOB)
    command = [sys.executable, "-m", "weir.shell.cli", "run", str(tmp_path / "job.sql"), "--state-dir",
               str(tmp_path / "state"), "--no-progress"]
    root = Path(__file__).resolve().parents[3]
    with memory_cgroup(CGROUP_LIMIT) as cgroup:
        result = run_in(cgroup, command, cwd=tmp_path, capture_output=True, text=True,
                        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]  # -9: the kernel killed it at the limit
    got = duckdb.sql(f"SELECT count(*), sum(n), sum(total), count(DISTINCT k) FROM '{tmp_path}/out/**/*.parquet'")
    assert got.fetchall() == [(KEYS, KEYS, KEYS * (KEYS - 1) // 2, KEYS)]

"""A job whose window state is larger than its memory completes under a memory cgroup,
its state spilled to the state directory, with the output of DuckDB's batch query."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.support.cgroup import memory_cgroup, run_in, unavailable_reason

MB = 1 << 20
#: The cgroup's limit, and the managed memory the job's one stateful operator gets (the least).
CGROUP_LIMIT, MANAGED = 400 * MB, 64 * MB
KEYS = 600_000

JOB = """
SET 'taskmanager.memory.managed.size' = '64mb';
CREATE TABLE events (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'events.parquet', 'format' = 'parquet');
CREATE TABLE totals (k VARCHAR, n BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'parquet');
INSERT INTO totals SELECT k, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY k, window_start, window_end;
"""


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"no memory cgroup here: {unavailable_reason()}")
def test_window_state_beyond_managed_memory_spills_and_completes_in_a_cgroup(tmp_path):
    # Keys of 128 characters, each in its own window: the keys alone are larger than the
    # DuckDB memory the state may use, so the job can only finish if its state spilled.
    duckdb.sql(f"""COPY (SELECT repeat(md5(i::VARCHAR), 4) AS k, i AS v,
                          TIMESTAMP '2024-01-01' + to_microseconds((i // 100)::BIGINT) AS ts
                        FROM range({KEYS}) t(i)) TO '{tmp_path / "events.parquet"}' (FORMAT parquet)""")
    (key_bytes,) = duckdb.sql(f"SELECT sum(strlen(k)) FROM '{tmp_path / 'events.parquet'}'").fetchall()[0]
    assert key_bytes > MANAGED
    (tmp_path / "job.sql").write_text(JOB)
    command = [sys.executable, "-m", "weir.shell.cli", "run", str(tmp_path / "job.sql"), "--state-dir",
               str(tmp_path / "state")]
    env_cwd = Path(__file__).resolve().parents[3]
    with memory_cgroup(CGROUP_LIMIT) as cgroup:
        result = run_in(cgroup, command, cwd=tmp_path, capture_output=True, text=True,
                        env={"PYTHONPATH": str(env_cwd), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]  # -9: the kernel killed it at the limit
    got = duckdb.sql(f"SELECT count(*), sum(n), sum(total), count(DISTINCT k) FROM '{tmp_path}/out/**/*.parquet'")
    assert got.fetchall() == [(KEYS, KEYS, KEYS * (KEYS - 1) // 2, KEYS)]


"""Backpressure between parallel workers: an outbox holds at most 'weir.exchange.buffer-size'
bytes, and a send past it waits while the worker keeps reading its peers. With a bound far
below one batch every exchanged message waits — window firings included — and the job must
still finish with exact output, checkpoints completing on the way, and restore from them."""
from __future__ import annotations

from pathlib import Path

import duckdb

from jobs import outcome_within
from tests.engine.runtime.test_exchange import run

ROWS = 24_000
#: Seconds a run may take before the test calls it hung (a guard, not a measure).
GUARD_SECONDS = 240

# Window counts per key cross one exchange (by k); the per-window top 2 crosses a second (by
# window): each firing of ~4,000 keys' counts is sent, to one worker, while both also receive.
JOB = """
CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet');
CREATE TABLE hot (k BIGINT, n BIGINT, window_start TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO hot SELECT k, n, window_start FROM (
  SELECT *, RANK() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS r FROM (
    SELECT k, window_start, window_end, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND))
    GROUP BY k, window_start, window_end)) WHERE r <= 2;
CREATE MATERIALIZED VIEW per_key AS SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total
FROM TUMBLE(events, ts, INTERVAL '5' SECOND) GROUP BY k, window_start, window_end;
"""


def write_events(tmp: Path) -> Path:
    path = tmp / "events.parquet"
    duckdb.sql(f"""COPY (SELECT (i * i) % 4001 AS k, i AS v,
                          TIMESTAMP '2024-01-01' + to_milliseconds(i - (hash(i) % 500)::BIGINT) AS ts
                        FROM range({ROWS}) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 3000)""")
    return path


def expected(path: Path) -> tuple[list, list]:
    hot = duckdb.sql(f"""
        SELECT k, n, window_start FROM (
          SELECT *, RANK() OVER (PARTITION BY window_start ORDER BY n DESC) AS r FROM (
            SELECT k, time_bucket(INTERVAL 5 SECOND, ts) AS window_start, count(*) AS n
            FROM read_parquet('{path}') GROUP BY ALL)) WHERE r <= 2 ORDER BY ALL""").fetchall()
    per_key = duckdb.sql(f"""SELECT k, time_bucket(INTERVAL 5 SECOND, ts) AS window_start, count(*), sum(v)
                             FROM read_parquet('{path}') GROUP BY ALL ORDER BY ALL""").fetchall()
    return hot, per_key


def outputs(tmp: Path) -> tuple[list, list]:
    hot = duckdb.sql(f"SELECT * FROM read_csv('{tmp / 'out'}/*.csv') ORDER BY ALL").fetchall()
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        return hot, con.sql("SELECT * FROM per_key ORDER BY ALL").fetchall()
    finally:
        con.close()


SETTINGS = {"weir.exchange.buffer-size": "1kb", "weir.checkpointing.interval-batches": "3"}


def test_a_tiny_outbox_bound_backpressures_every_send_and_the_output_stays_exact(tmp_path):
    path = write_events(tmp_path)
    sql = JOB.format(path=path, out=tmp_path / "out")
    result = run(sql, tmp_path, 2, **SETTINGS)
    assert outputs(tmp_path) == expected(path)
    assert result.rows_read == ROWS
    assert result.backpressure_waits > 0, "a message larger than the bound waits until it is written"
    assert [c for c in result.checkpoints if c.kind == "checkpoint"], "checkpoints complete while backpressured"


RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
           "restart-strategy.fixed-delay.delay": "0s"}


def test_a_worker_killed_while_backpressured_restarts_from_its_checkpoint_exactly(tmp_path, monkeypatch):
    """Worker 1 dies as it commits checkpoint 2 (its peer may be waiting to send to it): the
    coordinator notices, restarts both, they restore the checkpoint taken under backpressure
    and the output is exact. Run in a thread: a hang fails the test instead of blocking it."""
    monkeypatch.setenv("WEIR_FAULT", "commit:2@1")  # read by the spawned workers
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(tmp_path / "fired"))
    path = write_events(tmp_path)
    sql = JOB.format(path=path, out=tmp_path / "out")
    outcome = outcome_within(GUARD_SECONDS, lambda: run(sql, tmp_path, 2, **SETTINGS, **RESTART), "the job hung")
    assert not isinstance(outcome, BaseException), outcome
    assert (tmp_path / "fired").exists(), "the fault never fired"
    assert outputs(tmp_path) == expected(path)

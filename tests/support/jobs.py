"""Jobs shared by the tests: the issue's exact text, the same job over Nexmark, and a small
keyed window job over csv files with its DuckDB oracle."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

PARQUET_SOURCE = "WITH ('connector' = 'filesystem', 'path' = 'data/bids.parquet', 'format' = 'parquet');"

ISSUE_JOB = f"""\
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) {PARQUET_SOURCE}

CREATE TABLE auction_counts (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, total BIGINT, top BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/auction_counts', 'format' = 'csv');

INSERT INTO auction_counts
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

CREATE MATERIALIZED VIEW channel_minutes AS
SELECT channel, window_start, window_end, COUNT(*) AS bids
FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE)
GROUP BY channel, window_start, window_end;
"""


def nexmark_source(events: int, rate: int = 1000) -> str:
    return f"WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '{events}', 'first-event.rate' = '{rate}');"


def issue_job_over_nexmark(events: int, rate: int = 1000) -> str:
    """The issue's job reading generated bids instead of a parquet file."""
    return ISSUE_JOB.replace(PARQUET_SOURCE, nexmark_source(events, rate))


def bids_over_nexmark(events: int, rate: int = 1000) -> str:
    """Only the issue's `bids` table, over generated bids."""
    return issue_job_over_nexmark(events, rate).split("\n\n")[0] + "\n"


#: Per-key 10 s windows of csv rows (ts, k, v) from '{data}' into csv files under '{out}'.
KEY_WINDOWS_JOB = """
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
CREATE TABLE key_windows (k VARCHAR, window_start TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO key_windows SELECT k, window_start, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
"""
#: KEY_WINDOWS_JOB's rows as a DuckDB batch query over '{files}' (a file or a glob).
KEY_WINDOWS_ORACLE = ("SELECT k, time_bucket(INTERVAL '10 seconds', ts) AS window_start, COUNT(*) AS cnt, "
                      "SUM(v) AS total FROM read_csv('{files}', header = true) GROUP BY ALL ORDER BY ALL")


def outcome_within(seconds: float, call: Callable[[], Any], hung: str) -> Any:
    """``call()`` in a thread: what it returned, or the error it raised. Fails with ``hung`` if it
    is still running after ``seconds`` (a job waiting forever on a dead worker, say)."""
    outcome: list = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - returned to the test
            outcome.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), hung
    return outcome[0]


#: Two workers, a checkpoint after every 2-row batch, one restart at once: for a worker killed
#: mid-run whose job must resume from its latest checkpoint.
KILL_SETTINGS = {"parallelism.default": "2", "weir.source.batch-size": "2", "weir.checkpointing.interval-batches": "1",
                 "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
                 "restart-strategy.fixed-delay.delay": "0s"}


def stop_after_first_checkpoint(state_dir: Path) -> Callable:
    """An ``on_checkpoint`` that asks the job under ``state_dir`` to stop with a savepoint once,
    after its first checkpoint, so the savepoint comes part-way (a request left over would stop
    the restored run too)."""
    def ask(event) -> None:
        if event.checkpoint_id == 1:
            (state_dir / "control").mkdir(parents=True, exist_ok=True)
            (state_dir / "control" / "stop-test.request").write_text('{"kind": "stop", "path": null}')
    return ask


def run_with_worker_1_killed(tmp_path: Path, monkeypatch, sql: str, seconds: float = 240) -> list[str]:
    """Plan ``sql`` at KILL_SETTINGS (results in ``tmp_path / "v.duckdb"``) and run it with
    worker 1 killed by SIGKILL after its 3rd source batch, once; asserts it ended and the fault
    fired, and returns the job's warnings."""
    from weir.engine.runtime.job import JobOptions, run_job
    from weir.planner.planner import plan_script
    from weir.sql import parse

    monkeypatch.setenv("WEIR_FAULT", "batch:3@1")
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(tmp_path / "fired"))
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb"), settings=KILL_SETTINGS).graph
    warnings: list[str] = []
    outcome = outcome_within(seconds, lambda: run_job(graph, JobOptions(state_dir=tmp_path / "state",
                                                                        warn=warnings.append)), "the job hung")
    assert not isinstance(outcome, BaseException), outcome
    assert (tmp_path / "fired").exists(), "the fault never fired"
    return warnings

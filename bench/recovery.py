"""Benchmark: how long a job holding 1,000,000 keys of window state takes to recover.

    python bench/recovery.py [--keys 1000000]

A job counts rows per key in a one-hour tumbling window, so every key's window
stays open. It reads N rows with N distinct keys, takes a checkpoint once all
are in, and is killed (SIGKILL). Then the job is started again in this process
and the time from start to the first batch processed after the restore is
printed, with the checkpoint's size.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
#: Rows per row group of the input and per source batch: a row group is a split read in
#: batches, so with equal sizes n batches are exactly n * BATCH rows.
BATCH = 122_880

JOB = """
CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'parquet');
CREATE TABLE totals (k BIGINT, window_start TIMESTAMP(3), n BIGINT, total BIGINT)
WITH ('connector' = 'blackhole');
INSERT INTO totals SELECT k, window_start, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY k, window_start, window_end;
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=HERE / ".data" / "recovery")
    args = parser.parse_args()
    work = args.workdir
    subprocess.run(["rm", "-rf", str(work)], check=True)
    work.mkdir(parents=True)
    data = work / "events.parquet"
    # N distinct keys, then as many rows again, so that the job is still reading when killed.
    duckdb.sql(f"COPY (SELECT i % {args.keys} AS k, i AS v, TIMESTAMP '2024-01-01' + to_milliseconds(i // 1000) AS ts "
               f"FROM range({2 * args.keys}) t(i)) TO '{data}' (FORMAT parquet, ROW_GROUP_SIZE {BATCH})")
    job = work / "job.sql"
    job.write_text(JOB.format(data=data))
    batches = -(-args.keys // BATCH)  # the first checkpoint comes once every key has been read
    command = [sys.executable, "-m", "weir.shell.cli", "run", str(job), "--no-progress", "--state-dir", str(work / "state"),
               "--set", f"weir.source.batch-size={BATCH}", "--set", f"weir.checkpointing.interval-batches={batches}"]
    # Die at the step after the checkpoint holding every key has been written.
    env = {**os.environ, "WEIR_FAULT": "after-metadata:1"}
    killed = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr

    from weir.engine.runtime.job import JobOptions, run_job
    from weir.planner.planner import plan_script
    from weir.sql import parse

    os.chdir(work)
    script = plan_script(parse(job.read_text()), settings={"weir.source.batch-size": str(BATCH)})
    started = time.perf_counter()
    seen: dict[str, float] = {}
    executors = []

    def first_progress(progress) -> None:
        seen.setdefault("processing", time.perf_counter())
        state = executors[0].tasks["totals.window_aggregate"].operator.snapshot()["tables"]
        seen["rows"] = sum(t.num_rows for t in state.values())
        executors[0].cancel()

    from weir.engine.errors import JobCancelled

    try:
        run_job(script.graph, JobOptions(state_dir=work / "state", on_progress=first_progress, progress_interval=0,
                                         on_executor=executors.append))
    except JobCancelled:
        pass
    assert seen["rows"] >= args.keys, f"the restored state holds {seen['rows']:,} rows, not every key"
    checkpoint = sorted((work / "state" / "checkpoints").glob("chk-*"))[-1]
    size = sum(f.stat().st_size for f in checkpoint.rglob("*") if f.is_file())
    print(f"keys                  {args.keys:,}")
    print(f"checkpoint size       {size / 2**20:.1f} MiB")
    print(f"state rows            {seen['rows']:,} (restored, with the batch read after)")
    print(f"recovery_seconds      {seen['processing'] - started:.2f}  (start to the first batch after the restore)")


if __name__ == "__main__":
    main()

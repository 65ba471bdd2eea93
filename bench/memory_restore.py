"""Benchmark: a job killed with window state larger than memory restores within its memory limit.

    python bench/memory_restore.py [--keys 4000000] [--cgroup-mb 320] [--python PYTHON]

The job of ``bench/memory.py`` (one open one-hour window per key, N rows with N distinct
keys, windows written to parquet) runs as `weir run` with a checkpoint after
``--checkpoint-batches`` source batches of 65,536 rows (default: all but the last one, so
the checkpoint holds nearly all the state) and is killed right after that checkpoint is
committed (``WEIR_FAULT=commit:1``). The same command is then run again: it restores the
checkpoint's state and reads the rest. Both runs are in a memory cgroup of
``--cgroup-mb`` where this machine allows one (root and a cgroup memory controller).
Printed for each: whole-process time, peak RSS (the kernel's rusage of the process tree)
and the cgroup's peak; then the checkpoint's size and whether the output equals DuckDB's
batch query. ``--python`` runs the restoring run with another interpreter (another weir
tree: e.g. one that reads a snapshot whole when it restores, to compare).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from memory import directory_bytes, launch_measured, make_input  # noqa: E402  (bench/memory.py, beside this file)
from tests.support.cgroup import unavailable_reason  # noqa: E402

BATCH_ROWS = 65_536
JOB = """SET 'weir.checkpointing.interval-batches' = '{batches}';
CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'parquet');
CREATE TABLE totals (k BIGINT, window_start TIMESTAMP(3), n BIGINT, total BIGINT, high BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'parquet');
INSERT INTO totals SELECT k, window_start, COUNT(*), SUM(v), MAX(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY k, window_start, window_end;
"""


def launch(command: list[str], log: Path, cgroup_mb: int | None, env: dict) -> dict:
    started = time.perf_counter()
    code, usage, peak = launch_measured(command, log, cgroup_mb, env)
    return {"seconds": time.perf_counter() - started, "returncode": code, "peak_rss_mb": usage.ru_maxrss / 1024,
            "cgroup_peak_mb": peak / 2**20 if peak else None, "log": log.read_text()[-2000:]}


def report(name: str, figures: dict) -> None:
    parts = [f"{name}: exit {figures['returncode']}", f"{figures['seconds']:.1f} s",
             f"peak RSS {figures['peak_rss_mb']:.0f} MB"]
    if figures["cgroup_peak_mb"] is not None:
        parts.append(f"cgroup peak {figures['cgroup_peak_mb']:.0f} MB")
    print(", ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=4_000_000)
    parser.add_argument("--cgroup-mb", type=int, default=320)
    parser.add_argument("--checkpoint-batches", type=int, help="source batches before the checkpoint")
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the restoring run")
    parser.add_argument("--workdir", type=Path, default=HERE / ".data" / "memory")
    args = parser.parse_args()
    data = args.workdir / f"events-{args.keys}.parquet"
    make_input(data, args.keys)
    batches = args.checkpoint_batches or max(1, -(-args.keys // BATCH_ROWS) - 1)
    out, state = args.workdir / "restore-out", args.workdir / "restore-state"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    job = args.workdir / "memory_restore_job.sql"
    job.write_text(JOB.format(batches=batches, data=data, out=out))
    reason = unavailable_reason()
    cgroup_mb = None if reason else args.cgroup_mb
    where = f"in a {args.cgroup_mb} MB cgroup" if cgroup_mb else f"without a cgroup ({reason})"
    print(f"{args.keys:,} rows and distinct keys in one open window, a checkpoint after {batches} batches, "
          f"{where}")

    def command(python: str) -> list[str]:
        return [python, "-m", "weir.shell.cli", "run", str(job), "--state-dir", str(state), "--no-progress"]

    killed = launch(command(sys.executable), args.workdir / "memory_restore_killed.log", cgroup_mb,
                    {**os.environ, "WEIR_FAULT": "commit:1"})
    report("run killed after checkpoint 1", killed)
    checkpoints = state / "checkpoints"
    print(f"checkpoint on disk: {directory_bytes(checkpoints) / 2**20:.0f} MB")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_FAULT")}
    restored = launch(command(args.python), args.workdir / "memory_restore_resumed.log", cgroup_mb, env)
    report("run restoring it", restored)
    if restored["returncode"] != 0:
        print(restored["log"], file=sys.stderr)
        return
    expected = duckdb.sql(f"""SELECT count(*), sum(n), sum(total) FROM (SELECT k, count(*) n, sum(v) total
                              FROM '{data}' GROUP BY k, time_bucket(INTERVAL 1 HOUR, ts))""").fetchall()
    got = duckdb.sql(f"SELECT count(*), sum(n), sum(total) FROM '{out}/**/*.parquet'").fetchall()
    print("output exact" if expected == got else f"OUTPUT DIFFERS: {got} != {expected}")


if __name__ == "__main__":
    main()

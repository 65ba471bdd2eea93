"""Benchmark: window state larger than memory completes, spilling to the state directory.

    python bench/memory.py [--keys 8000000] [--cgroup-mb 700] [--managed 64mb] [--unconstrained]
                           [--checkpoint-interval 10s] [--query tumble|session]

A job counts and sums rows per key in a one-hour tumbling window (``--query session``: a
one-hour SESSION window per key) over N rows with N distinct keys (every key's window stays
open until the input ends, whose last watermark fires all N at once), writing the windows to
parquet. It runs as `weir run` in a memory cgroup of
``--cgroup-mb`` (where this machine allows one: root and a cgroup memory
controller), with ``'taskmanager.memory.managed.size'`` = ``--managed`` if
given (else the default: 0.4 of the cgroup's limit less 256 MB for the process
outside DuckDB), checkpointing every ``--checkpoint-interval`` if given (the
snapshots of the large state are then staged as Parquet batch by batch). Printed: whole-process
time, peak RSS (the kernel's rusage of the process tree, and the cgroup's peak),
the most bytes of state spilled to disk at once (sampled), whether the output
equals DuckDB's batch query, and the load average (the machine may be shared).
``--unconstrained`` first runs the same job with no limit, to show the state's size in
memory — its peak RSS — and its ratio to the cgroup's limit: the state is that many times the
memory limit. The 10x case: ``--keys 18000000 --cgroup-mb 320 --unconstrained``.

The session case's rows of one key are a few milliseconds apart at most, far inside the
one-hour gap, so each key has one session: the oracle is the same ``GROUP BY`` as the tumble's.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests.support.cgroup import entering, memory_cgroup, peak_usage, unavailable_reason  # noqa: E402

JOB = """{settings}
CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'parquet');
CREATE TABLE totals (k BIGINT, window_start TIMESTAMP(3), n BIGINT, total BIGINT, high BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'parquet');
INSERT INTO totals SELECT k, window_start, COUNT(*), SUM(v), MAX(v)
FROM {window} GROUP BY k, window_start, window_end;
"""
#: The window of each ``--query``: a table function over ``events``.
WINDOWS = {
    "tumble": "TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
    "session": "TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' HOUR))",
}


def make_input(path: Path, keys: int) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.sql(f"""COPY (SELECT hash(i) % 9223372036854775807 AS k, i AS v,
                          TIMESTAMP '2024-01-01' + to_microseconds((i // 1000)::BIGINT) AS ts
                        FROM range({keys}) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 122880)""")


def directory_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def launch_measured(command: list[str], log: Path, cgroup_mb: int | None,
                    env: dict | None = None) -> tuple[int, resource.struct_rusage, int | None]:
    """Run ``command`` to its end, its output into ``log``, in a memory cgroup of ``cgroup_mb``
    (None: none): its exit code, the rusage of its process tree, and the cgroup's peak bytes."""
    with open(log, "w") as output:
        def launch(preexec=None) -> tuple[int, resource.struct_rusage]:
            process = subprocess.Popen(command, cwd=HERE.parent, stdout=output, stderr=subprocess.STDOUT,
                                       preexec_fn=preexec, env=env)
            _, status, usage = os.wait4(process.pid, 0)
            return os.waitstatus_to_exitcode(status), usage

        if cgroup_mb is None:
            return (*launch(), None)
        with memory_cgroup(cgroup_mb << 20) as cgroup:
            returncode, usage = launch(entering(cgroup))
            return returncode, usage, peak_usage(cgroup)


def run(workdir: Path, data: Path, settings: str, cgroup_mb: int | None,
        checkpoint_interval: str | None = None, query: str = "tumble") -> dict:
    out, state = workdir / "out", workdir / "state"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)
    job = workdir / "memory_job.sql"
    job.write_text(JOB.format(settings=settings, data=data, out=out, window=WINDOWS[query]))
    command = [sys.executable, "-m", "weir.shell.cli", "run", str(job), "--state-dir", str(state), "--no-progress"]
    if checkpoint_interval:
        command += ["--checkpoint-interval", checkpoint_interval]
    spilled = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            spilled[0] = max(spilled[0], directory_bytes(state / "spill"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    log = workdir / "memory_job.log"
    load_before = os.getloadavg()
    started = time.perf_counter()
    returncode, usage, cgroup_peak = launch_measured(command, log, cgroup_mb)
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    figures = {"seconds": seconds, "returncode": returncode, "peak_rss_mb": usage.ru_maxrss / 1024,
               "cgroup_peak_mb": cgroup_peak / 2**20 if cgroup_peak else None, "spilled_mb": spilled[0] / 2**20,
               "stderr": log.read_text()[-2000:], "load": (load_before, os.getloadavg())}
    if returncode == 0:
        expected = duckdb.sql(f"""SELECT count(*), sum(n), sum(total) FROM (SELECT k, count(*) n, sum(v) total
                                  FROM '{data}' GROUP BY k, time_bucket(INTERVAL 1 HOUR, ts))""").fetchall()
        got = duckdb.sql(f"SELECT count(*), sum(n), sum(total) FROM '{out}/**/*.parquet'").fetchall()
        figures["exact"] = expected == got
    return figures


def report(name: str, figures: dict) -> None:
    parts = [f"{name}: exit {figures['returncode']}", f"{figures['seconds']:.1f} s"]
    parts.append(f"peak RSS {figures['peak_rss_mb']:.0f} MB")
    if figures["cgroup_peak_mb"] is not None:
        parts.append(f"cgroup peak {figures['cgroup_peak_mb']:.0f} MB")
    parts.append(f"state spilled at most {figures['spilled_mb']:.0f} MB")
    if "exact" in figures:
        parts.append("output exact" if figures["exact"] else "OUTPUT DIFFERS")
    (before, _, _), (after_1, after_5, after_15) = figures["load"]
    parts.append(f"load average {before:.1f} at the start, {after_1:.1f}/{after_5:.1f}/{after_15:.1f} "
                 "(1/5/15 min) at the end")
    print(", ".join(parts), flush=True)
    if figures["returncode"] != 0:
        print(figures["stderr"], file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=8_000_000)
    parser.add_argument("--cgroup-mb", type=int, default=700)
    parser.add_argument("--managed", help="'taskmanager.memory.managed.size', e.g. 64mb (default: the fraction)")
    parser.add_argument("--unconstrained", action="store_true", help="first run without any limit")
    parser.add_argument("--checkpoint-interval", help="checkpoint every DURATION (e.g. 10s) in the limited run")
    parser.add_argument("--query", choices=sorted(WINDOWS), default="tumble", help="the window (default tumble)")
    parser.add_argument("--workdir", type=Path, default=HERE / ".data" / "memory")
    args = parser.parse_args()
    data = args.workdir / f"events-{args.keys}.parquet"
    make_input(data, args.keys)
    settings = f"SET 'taskmanager.memory.managed.size' = '{args.managed}';" if args.managed else ""
    print(f"{args.query}: {args.keys:,} rows, {args.keys:,} distinct keys, each in one open window; "
          f"input {data.stat().st_size >> 20} MB", flush=True)
    free = None
    if args.unconstrained:
        free = run(args.workdir, data, "", None, query=args.query)
        report("no limit", free)
    reason = unavailable_reason()
    if reason is not None:
        print(f"no memory cgroup ({reason}): running without one")
        report(f"managed {args.managed or 'default'}",
               run(args.workdir, data, settings, None, args.checkpoint_interval, args.query))
        return
    checkpoints = f", a checkpoint every {args.checkpoint_interval}" if args.checkpoint_interval else ""
    report(f"cgroup {args.cgroup_mb} MB, managed {args.managed or 'default'}{checkpoints}",
           run(args.workdir, data, settings, args.cgroup_mb, args.checkpoint_interval, args.query))
    if free is not None:
        print(f"the job's peak RSS with no limit is {free['peak_rss_mb'] / args.cgroup_mb:.1f}x the cgroup's limit")


if __name__ == "__main__":
    main()

"""Benchmark: does a long job's memory stay flat? RSS over a TUMBLE job of many events.

    python bench/long_run.py [--events 100000000] [--source parquet|nexmark] [--runs 1]
                             [--baseline DIR]

Runs `weir run` of the TUMBLE of ``bench/compare.py`` (10 s per auction: COUNT, SUM, MAX,
into a blackhole) at parallelism 1 over ``--events`` bids, and reads the process's resident
memory (``VmRSS``) every 0.2 s while it runs. The bids (``--source``):

- ``parquet``: one Parquet file made by ``tumble.generate``, as compare.py's, cached in
  ``bench/.data/`` (100M events: 1.5 GB, a minute or two to generate the first time);
- ``nexmark``: weir's Nexmark generator ('first-event.rate' 10000).

Either way the events span 10,000 s of event time per 100M events, so a thousand windows fire
one after another and the state stays about one window's keys. It prints, per tenth of the
run's wall time, the largest RSS seen in it, then the peak of the second half against that of
the first (without its first tenth: start-up, and the first windows' state growing): about 1
for a job whose memory is flat, more for one whose memory creeps up as it runs.

With ``--baseline DIR`` the job also runs with weir from DIR (a directory holding a ``weir``
package: a symlink to another checkout, first on PYTHONPATH), alternating with this tree.
Bytecode is cached under ``bench/.data/pycache`` for both, as in the other benchmarks.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from tumble import generate

HERE = Path(__file__).resolve().parent
WORK = HERE / ".data" / "long-run"

SOURCES = {
    "parquet": "'connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet'",
    "nexmark": "'connector' = 'nexmark', 'table' = 'bid', 'events' = '{events}', 'first-event.rate' = '10000'",
}
JOB = """
CREATE TABLE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND) WITH ({source});
CREATE TABLE out (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
                  bids BIGINT, total BIGINT, top BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
"""
TENTHS = 10


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run(env: dict[str, str]) -> tuple[float, list[float]]:
    """(wall s, the largest RSS in MB of each tenth of the run)."""
    command = [sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--fresh", "--no-progress"]
    started = time.perf_counter()
    process = subprocess.Popen(command, cwd=WORK, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples: list[tuple[float, float]] = []
    while process.poll() is None:
        rss = rss_mb(process.pid)
        if rss is not None:
            samples.append((time.perf_counter() - started, rss))
        time.sleep(0.2)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"the job failed:\n{process.stderr.read().decode()[-3000:]}")
    peaks = [0.0] * TENTHS
    for at, rss in samples:
        tenth = min(TENTHS - 1, int(at / wall * TENTHS))
        peaks[tenth] = max(peaks[tenth], rss)
    return wall, peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000_000)
    parser.add_argument("--source", choices=sorted(SOURCES), default="parquet")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--baseline", metavar="DIR", help="also run weir from DIR (holding a `weir` package)")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    path = HERE / ".data" / f"bids-{args.events}.parquet"
    if args.source == "parquet" and not path.exists():
        generate(path, args.events)
    source = SOURCES[args.source].format(path=path, events=args.events)
    (WORK / "job.sql").write_text(JOB.format(source=source))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(HERE / ".data" / "pycache")
    trees = {"this tree": env}
    if args.baseline:
        trees["baseline"] = {**env, "PYTHONPATH": args.baseline}
    print(f"TUMBLE over {args.events:,} events ({args.source}); RSS MB, the largest in each tenth of the run")
    print(f"{'':12} {'wall s':>7}  {' '.join(f'{i + 1:>5}' for i in range(TENTHS))}  {'2nd half / 1st':>14}")
    for _ in range(args.runs):
        for name, tree_env in trees.items():
            wall, peaks = run(tree_env)
            print(f"{name:12} {wall:7.1f}  {' '.join(f'{p:5.0f}' for p in peaks)}  "
                  f"{max(peaks[TENTHS // 2:]) / max(peaks[1:TENTHS // 2]):14.2f}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()

"""Benchmark: weir against DuckDB batch (and Polars, when installed) on the same bids, whole process.

    python bench/compare.py [--events 1000000,10000000] [--only tumble,hop] [--runs 3]
                            [--parallelism 1,2] [--format parquet|csv] [--baseline DIR]

Generates the bids once per size with ``tumble.generate`` (Nexmark-like: hot
auctions, log-uniform prices, times out of order by up to 1.5 s; one Parquet
file of 65,536-row row groups, and a CSV copy), cached in ``bench/.data/``.
Then, for each job and size, it runs in turn, ``--runs`` times:

- weir: ``weir run`` of the job in a child process (a blackhole sink; the GROUP
  BY view is a materialized view in a DuckDB file), at each ``--parallelism``;
- DuckDB: the equivalent batch query in a child process with 2 threads, its
  result read into Arrow;
- Polars (skipped when not installed): the same as a lazy query, 2 threads.

With ``--baseline DIR`` weir also runs from DIR (a directory holding a ``weir`` package: a
symlink to another checkout, first on PYTHONPATH), alternating with this tree: before and after
a change in one run. weir's children find their bytecode under ``bench/.data/pycache``
(PYTHONPYCACHEPREFIX) as an installed package does; a checkout run with
PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module it imports on every start.

Every figure is of the whole child process (start-up and imports included):
wall seconds, CPU seconds (user + sys of the process and its descendants, from
``wait4``: this process is their subreaper, so a fork server that outlives the
job, and the workers it forked, are counted too), peak RSS (of the largest
process), and events/s by wall. It prints the medians, then each
engine's ratio to DuckDB (wall and CPU) and weir's speed-up from p=1 to p=2.
On a loaded machine read CPU, not wall: CPU is what a job costs, wall what
the other processes left it.

Jobs: ``tumble`` (10 s per auction: COUNT, SUM, MAX), ``hop`` (10 s every 2 s,
the same aggregates), ``cumulate`` (10 s in 2 s steps), ``session`` (gap 1 s
per bidder: COUNT, SUM, MAX) and ``groupby`` (a materialized view of COUNT,
SUM, MAX per auction).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from startup import become_subreaper, reap_orphans
from tumble import generate

HERE = Path(__file__).resolve().parent

SOURCE = """
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{bids}', 'format' = '{format}');
CREATE TABLE out ({columns}) WITH ('connector' = 'blackhole');
"""
WINDOW_COLUMNS = "{key} BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT, total BIGINT, top BIGINT"
WINDOW_INSERT = """INSERT INTO out SELECT {key}, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE({window}) GROUP BY {key}, window_start, window_end;"""

#: job -> (weir's statements after the source, DuckDB's batch query over {scan}).
JOBS: dict[str, tuple[str, str]] = {
    "tumble": (
        WINDOW_INSERT.format(key="auction",
                             window="TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND)"),
        """SELECT auction, time_bucket(INTERVAL 10 SECOND, date_time) AS window_start,
                  count(*), sum(price), max(price) FROM {scan} GROUP BY ALL""",
    ),
    "hop": (
        WINDOW_INSERT.format(key="auction", window="HOP(TABLE bids, DESCRIPTOR(date_time), "
                                                   "INTERVAL '2' SECOND, INTERVAL '10' SECOND)"),
        """SELECT auction, time_bucket(INTERVAL 2 SECOND, date_time) - to_seconds(2 * k) AS window_start,
                  count(*), sum(price), max(price) FROM {scan}, range(5) r(k) GROUP BY ALL""",
    ),
    "cumulate": (
        WINDOW_INSERT.format(key="auction", window="CUMULATE(TABLE bids, DESCRIPTOR(date_time), "
                                                   "INTERVAL '2' SECOND, INTERVAL '10' SECOND)"),
        """SELECT auction, time_bucket(INTERVAL 10 SECOND, date_time) AS window_start,
                  time_bucket(INTERVAL 10 SECOND, date_time) + to_seconds(2 * (k + 1)) AS window_end,
                  count(*), sum(price), max(price) FROM {scan}, range(5) r(k)
           WHERE time_bucket(INTERVAL 10 SECOND, date_time) + to_seconds(2 * (k + 1)) > date_time
           GROUP BY ALL""",
    ),
    "session": (
        WINDOW_INSERT.format(key="bidder", window="SESSION(TABLE bids PARTITION BY bidder, "
                                                  "DESCRIPTOR(date_time), INTERVAL '1' SECOND)"),
        # Flink merges sessions that touch: a new one starts more than the gap after the last row.
        # weir reads the times as TIMESTAMP(3): milliseconds here too, or gaps differ by a few µs.
        """SELECT bidder, min(date_time) AS window_start, max(date_time) + INTERVAL 1 SECOND AS window_end,
                  count(*), sum(price), max(price)
           FROM (SELECT *, sum(new::INT) OVER (PARTITION BY bidder ORDER BY date_time) AS session
                 FROM (SELECT *, coalesce(date_time - lag(date_time) OVER (PARTITION BY bidder ORDER BY date_time)
                                          > INTERVAL 1 SECOND, true) AS new
                       FROM (SELECT * REPLACE (date_trunc('millisecond', date_time) AS date_time) FROM {scan})))
           GROUP BY bidder, session""",
    ),
    "groupby": (
        """CREATE MATERIALIZED VIEW auction_totals AS
           SELECT auction, COUNT(*) AS bids, SUM(price) AS total, MAX(price) AS top FROM bids GROUP BY auction;""",
        "SELECT auction, count(*), sum(price), max(price) FROM {scan} GROUP BY ALL",
    ),
}
COLUMNS = {"session": WINDOW_COLUMNS.format(key="bidder"), "groupby": "auction BIGINT"}

DUCKDB_SCRIPT = """
import sys, duckdb
con = duckdb.connect(config={"threads": 2})
con.execute("SET enable_progress_bar = false")
print(con.sql(sys.argv[1]).to_arrow_table().num_rows)
"""

#: job -> Polars lazy query over ``bids`` (a LazyFrame), as source text run in the child.
POLARS_QUERIES = {
    "tumble": """bids.group_by("auction", pl.col("date_time").dt.truncate("10s").alias("window_start"))""",
    "hop": """bids.with_columns(k=pl.lit(list(range(5)))).explode("k").group_by(
        "auction", (pl.col("date_time").dt.truncate("2s") - pl.duration(seconds=2 * pl.col("k"))).alias("window_start"))""",
    "cumulate": """bids.with_columns(k=pl.lit(list(range(5))), s=pl.col("date_time").dt.truncate("10s")).explode("k")
        .with_columns(window_end=pl.col("s") + pl.duration(seconds=2 * (pl.col("k") + 1)))
        .filter(pl.col("window_end") > pl.col("date_time")).group_by("auction", "s", "window_end")""",
    "session": """bids.with_columns(pl.col("date_time").dt.truncate("1ms")).sort("bidder", "date_time").with_columns(session=(
        (pl.col("date_time").diff().over("bidder") > pl.duration(seconds=1)).fill_null(True).cum_sum().over("bidder")))
        .group_by("bidder", "session")""",
    "groupby": """bids.group_by("auction")""",
}
POLARS_SCRIPT = """
import sys
import polars as pl
path, fmt, query = sys.argv[1:]
bids = pl.scan_parquet(path) if fmt == "parquet" else pl.scan_csv(path, try_parse_dates=True)
result = eval("(" + query + ")").agg(pl.len(), pl.col("price").sum().alias("total"), pl.col("price").max().alias("top")).collect()
print(result.height)
"""


@dataclass
class Run:
    wall: float
    cpu: float
    peak_bytes: int
    #: Result rows (DuckDB, Polars: the rows of the query; weir: the rows its sink took), or None.
    rows: int | None = None


def measure(argv: list[str], cwd: Path, env: dict | None = None) -> Run:
    """Run ``argv`` to the end: its wall time, CPU (user + sys, children included) and peak RSS."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # wait4 gives this child's own rusage (its waited-for children included), not every child's
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    orphans_cpu, orphans_peak = reap_orphans()  # a parallel job's fork server, and the workers it reaped
    cpu, peak = usage.ru_utime + usage.ru_stime + orphans_cpu, max(usage.ru_maxrss, orphans_peak)
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close(), proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{argv[:4]} failed ({proc.returncode}):\n{stdout.decode()}\n{stderr.decode()}")
    text = stdout.decode()
    sink = re.search(r"^\s*out\.sink\s+([\d,]+)", text, re.MULTILINE)
    rows = int(sink.group(1).replace(",", "")) if sink else int(text) if text.strip().isdigit() else None
    return Run(wall, cpu, peak * 1024, rows)


def inputs(work: Path, events: int, fmt: str) -> Path:
    """The bids file of ``events`` rows in ``fmt``, generated the first time."""
    parquet = work / f"bids-{events}.parquet"
    if not parquet.exists():
        generate(parquet, events)
    if fmt == "parquet":
        return parquet
    csv = work / f"bids-{events}.csv"
    if not csv.exists():
        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        con.execute(f"COPY (SELECT * FROM read_parquet('{parquet}')) TO '{csv}' (HEADER)")
        con.close()
    return csv


def engines(job: str, bids: Path, fmt: str, work: Path, parallelisms: list[int],
            baseline: str | None = None) -> dict[str, tuple[list[str], dict | None]]:
    """name -> (argv, environment) of every engine's run of ``job`` over ``bids``."""
    run_dir = work / f"compare-{job}"
    run_dir.mkdir(parents=True, exist_ok=True)
    weir_sql, batch_sql = JOBS[job]
    columns = COLUMNS.get(job, WINDOW_COLUMNS.format(key="auction"))
    (run_dir / "job.sql").write_text(SOURCE.format(bids=bids, format=fmt, columns=columns) + weir_sql + "\n")
    scan = f"read_parquet('{bids}')" if fmt == "parquet" else f"read_csv('{bids}', header = true)"
    found = {}
    # (without PYTHONDONTWRITEBYTECODE, or the cache is never written and every start compiles)
    cached = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
              "PYTHONPYCACHEPREFIX": str(HERE / ".data" / "pycache")}
    for p in parallelisms:
        argv = [sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress", "--db",
                "weir.duckdb", "--state-dir", "state", "--fresh", "--parallelism", str(p)]
        found[f"weir p={p}"] = (argv, cached)
        if baseline:
            found[f"base p={p}"] = (argv, {**cached, "PYTHONPATH": baseline})
    found["duckdb"] = ([sys.executable, "-c", DUCKDB_SCRIPT, batch_sql.format(scan=scan)], None)
    if importlib.util.find_spec("polars") is not None:
        env = {**os.environ, "POLARS_MAX_THREADS": "2"}
        found["polars"] = ([sys.executable, "-c", POLARS_SCRIPT, str(bids), fmt, POLARS_QUERIES[job]], env)
    return found


def clean(run_dir: Path) -> None:
    for stale in ("state", "weir.duckdb", "weir.duckdb.wal"):
        path = run_dir / stale
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", default="1000000", help="comma-separated sizes (default 1000000)")
    parser.add_argument("--only", default=",".join(JOBS), help=f"comma-separated jobs of {', '.join(JOBS)}")
    parser.add_argument("--runs", type=int, default=3, help="runs of each engine, alternating; medians reported")
    parser.add_argument("--parallelism", default="1,2", help="weir's parallelisms (default 1,2)")
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    parser.add_argument("--workdir", type=Path, default=HERE / ".data")
    parser.add_argument("--baseline", metavar="DIR", help="also run weir from DIR (holding a `weir` package)")
    args = parser.parse_args()
    become_subreaper()  # (see ``measure``)
    jobs = args.only.split(",")
    unknown = set(jobs) - set(JOBS)
    if unknown:
        sys.exit(f"unknown job(s) {', '.join(sorted(unknown))}: choose from {', '.join(JOBS)}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    parallelisms = [int(p) for p in args.parallelism.split(",")]
    print(f"{'job':9} {'events':>10} {'engine':9} {'wall s':>7} {'CPU s':>7} {'ev/s (wall)':>12} {'peak MB':>8} "
          f"{'wall/duckdb':>11} {'CPU/duckdb':>10}")
    warmed: set[str] = set()
    for events in (int(e) for e in args.events.split(",")):
        bids = inputs(args.workdir, events, args.format)
        for job in jobs:
            found = engines(job, bids, args.format, args.workdir, parallelisms, args.baseline)
            runs: dict[str, list[Run]] = {name: [] for name in found}
            run_dir = args.workdir / f"compare-{job}"
            for name, (argv, env) in found.items():
                if name.startswith(("weir", "base")) and name[:4] not in warmed:  # compiles the bytecode cache
                    warmed.add(name[:4])
                    clean(run_dir)
                    measure(argv, run_dir, env)
            for _ in range(args.runs):
                for name, (argv, env) in found.items():
                    clean(run_dir)
                    runs[name].append(measure(argv, run_dir, env))
            medians = {name: Run(statistics.median(r.wall for r in rs), statistics.median(r.cpu for r in rs),
                                 max(r.peak_bytes for r in rs)) for name, rs in runs.items()}
            duck = medians["duckdb"]
            counts = {name: rs[-1].rows for name, rs in runs.items() if rs[-1].rows is not None}
            if len(set(counts.values())) > 1:
                print(f"{job:9} {events:>10,} result rows DIFFER: {counts}")
            for name, m in medians.items():
                print(f"{job:9} {events:>10,} {name:9} {m.wall:7.2f} {m.cpu:7.2f} {events / m.wall:12,.0f} "
                      f"{m.peak_bytes / 2**20:8.0f} {m.wall / duck.wall:11.2f} {m.cpu / duck.cpu:10.2f}")
            for tree in ("weir", "base"):
                if f"{tree} p=1" in medians and f"{tree} p=2" in medians:
                    one, two = medians[f"{tree} p=1"], medians[f"{tree} p=2"]
                    print(f"{job:9} {events:>10,} {tree} p=2 / p=1: {one.wall / two.wall:.2f}x faster by wall, "
                          f"{two.cpu / one.cpu:.2f}x the CPU")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

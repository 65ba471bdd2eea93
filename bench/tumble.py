"""Benchmark: the issue's tumble job with weir against the same query as a DuckDB batch.

    python bench/tumble.py [--events 1000000] [--variants]

Generates N Nexmark-like bids into Parquet (hot auctions, log-uniform prices,
event times out of order by up to 1.5 s), runs the job with `weir run` in a
child process, runs the equivalent DuckDB batch queries, and prints events/s
for both, their ratio, and weir's peak memory (the child's max RSS).

With --variants it also runs the job with a checkpoint every second and at
parallelism 2, and prints each one's events/s relative to the plain run. With
--repeat N every run is made N times, in turn (plain, checkpointed, parallel,
plain, ...), and each figure is the median of its N; the ratios of each round
are printed too, so the spread shows.

Start-up and the final commit are fixed costs of a job of any length: compare
parallelism with enough events that they matter little (20,000,000 events run
about 5 s at parallelism 2).

The input is one Parquet file written with 65,536-row row groups (77 for
5,000,000 events): each row group is a split, so at parallelism 2 the two
workers read alternate row groups and exchange rows by key. weir's figure is
the engine's time from its summary: from when the engine is loaded (at
parallelism 2, once both worker processes have started and imported it) to
the end of the final commit; the *_wall_* figures include process start-up.
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import statistics
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent

JOB = """
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{bids}', 'format' = 'parquet');

CREATE TABLE auction_counts (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, total BIGINT, top BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');

INSERT INTO auction_counts
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

CREATE MATERIALIZED VIEW channel_minutes AS
SELECT channel, window_start, window_end, COUNT(*) AS bids
FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE)
GROUP BY channel, window_start, window_end;
"""

BATCH = [
    """SELECT auction, time_bucket(INTERVAL 10 SECOND, date_time) AS window_start, count(*), sum(price), max(price)
       FROM read_parquet('{bids}') GROUP BY ALL""",
    """SELECT channel, time_bucket(INTERVAL 1 MINUTE, date_time) AS window_start, count(*)
       FROM read_parquet('{bids}') GROUP BY ALL""",
]


def generate(path: Path, events: int, rate: int = 10_000) -> None:
    """Nexmark-like bids: half on a hot auction per block, log-uniform prices, jittered times."""
    con = duckdb.connect()
    con.execute(f"""
        COPY (
          SELECT
            CASE WHEN hash(i, 1) % 2 = 0 THEN 1000 + (i // 50 * 3 // 100) * 100
                 ELSE 1000 + greatest(0, i // 50 * 3 - (hash(i, 2) % 100)::BIGINT) END AS auction,
            1000 + (hash(i, 3) % 1000)::BIGINT AS bidder,
            round(100 * pow(10, 6 * ((hash(i, 4) % 1000000) / 1000000.0)))::BIGINT AS price,
            CASE WHEN hash(i, 5) % 2 = 0 THEN ['Google', 'Facebook', 'Baidu', 'Apple'][1 + (hash(i, 6) % 4)::INT]
                 ELSE 'channel-' || (hash(i, 7) % 10000)::VARCHAR END AS channel,
            TIMESTAMP '2024-01-01 00:00:00' + to_microseconds((i * 1000000 // {rate})
                 - (hash(i, 8) % 1500000)::BIGINT) AS date_time
          FROM range({events}) t(i)
        ) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 65536)  -- a split per row group for the parallel reader
    """)
    con.close()


def run_weir(job: Path, db: Path, *extra: str) -> tuple[float, float, int]:
    """(engine seconds from the summary, wall seconds, peak RSS bytes) of `weir run`."""
    for stale in (db, Path(f"{db}.wal")):
        stale.unlink(missing_ok=True)
    subprocess.run(["rm", "-rf", str(job.parent / "out"), str(job.parent / "state")], check=True)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "weir.shell.cli", "run", str(job), "--db", str(db), "--no-progress",
         "--state-dir", str(job.parent / "state"), *extra],
        capture_output=True, text=True, cwd=HERE.parent,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"weir failed:\n{proc.stdout}\n{proc.stderr}")
    engine_seconds = float(re.search(r"finished in ([\d.]+) s", proc.stdout).group(1))
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return engine_seconds, wall, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=HERE / ".data")
    parser.add_argument("--variants", action="store_true",
                        help="also run with checkpoints every second and at parallelism 2")
    parser.add_argument("--repeat", type=int, default=1, help="make every run this many times; report medians")
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    bids = work / f"bids-{args.events}.parquet"
    if not bids.exists():
        generate(bids, args.events)
    job = work / "tumble.sql"
    job.write_text(JOB.format(bids=bids, out=work / "out" / "auction_counts"))
    db = work / "bench.duckdb"
    variants = [("plain", [])]
    if args.variants:
        variants += [("checkpoint_1s", ["--checkpoint-interval", "1s"]), ("parallelism_2", ["--parallelism", "2"])]
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name, _ in variants}
    for _ in range(args.repeat):
        for name, extra in variants:
            runs[name].append(run_weir(job, db, *extra))
    engine_s = statistics.median(r[0] for r in runs["plain"])
    wall_s = statistics.median(r[1] for r in runs["plain"])
    peak = max(r[2] for r in runs["plain"])

    con = duckdb.connect()
    started = time.perf_counter()
    for query in BATCH:
        con.sql(query.format(bids=bids)).fetchall()
    duck_s = time.perf_counter() - started

    figures = {
        "events": args.events,
        "weir_events_per_s": round(args.events / engine_s),
        "weir_events_per_s_wall": round(args.events / wall_s),
        "duckdb_batch_events_per_s": round(args.events / duck_s),
        "weir_to_duckdb_ratio": round((args.events / engine_s) / (args.events / duck_s), 3),
        "weir_peak_memory_mib": round(peak / 2**20, 1),
    }
    for name, _ in variants[1:]:
        seconds = statistics.median(r[0] for r in runs[name])
        wall = statistics.median(r[1] for r in runs[name])
        figures[f"weir_{name}_events_per_s"] = round(args.events / seconds)
        figures[f"weir_{name}_vs_plain"] = round(engine_s / seconds, 3)
        figures[f"weir_{name}_wall_vs_plain"] = round(wall_s / wall, 3)
        if args.repeat > 1:
            figures[f"weir_{name}_vs_plain_each"] = ", ".join(
                f"{plain[0] / run[0]:.2f}" for plain, run in zip(runs["plain"], runs[name]))
    for key, value in figures.items():
        print(f"{key:36} {value:,}" if isinstance(value, int) else f"{key:36} {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

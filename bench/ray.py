"""Benchmark: the tumble job at parallelism 2 on the Ray executor against the process executor.

    python bench/ray.py [--events 10000000] [--parallelism 2] [--batch-size 65536] [--repeat 1]

Starts a local Ray cluster of two nodes (a head and a second node, each with
``--parallelism`` CPUs: Ray's own ``ray.cluster_utils.Cluster``), then runs the
same job — Nexmark bids (two splits; of ``--events`` Nexmark events, the bids are 92%) counted per auction and 10-second TUMBLE
window into csv files, and per channel and minute into a materialized view —
once with 'execution.target' = 'local' (N worker processes) and once with
'ray' (N actors spread over the two nodes), in this process. For each it
prints events/s over the job's wall time (``run_job``: starting the workers or
actors, reading, the final commit; the cluster's own start-up is not counted,
a Ray cluster exists before its jobs) and over the engine's time (from when
every worker has loaded the engine), the ratio Ray / process, and whether the
two outputs are equal.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

# This file is bench/ray.py: with bench/ first on the path, `import ray` would import it, not Ray.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

JOB = """
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '{events}', 'splits' = '2');
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


def run(tmp: Path, target: str, args) -> tuple[float, float, int, dict]:
    """(wall seconds, engine seconds, bids read, output) of one run."""
    from weir.engine.runtime.job import JobOptions, run_job
    from weir.planner.planner import plan_script
    from weir.sql import parse

    sql = JOB.format(events=args.events, out=tmp / "out")
    settings = {"parallelism.default": str(args.parallelism), "weir.source.batch-size": str(args.batch_size),
                "execution.target": target}
    graph = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings).graph
    started = time.perf_counter()
    result = run_job(graph, JobOptions(state_dir=tmp / "state"))
    wall = time.perf_counter() - started
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        output = {"channel_minutes": con.sql("SELECT * FROM channel_minutes ORDER BY ALL").fetchall(),
                  "auction_counts": duckdb.sql(f"SELECT count(*), sum(bids), sum(total) FROM "
                                               f"read_csv('{tmp / 'out'}/*.csv')").fetchall()}
    finally:
        con.close()
    return wall, result.elapsed, result.rows_read, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=65536)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, in alternating order (medians)")
    args = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    started = time.perf_counter()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": args.parallelism})
    cluster.add_node(num_cpus=args.parallelism)
    ray.init(address=cluster.address, include_dashboard=False)
    print(f"two-node Ray cluster started in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    root = Path(tempfile.mkdtemp(prefix="weir-bench-ray-"))
    try:
        runs: dict[str, list] = {"local": [], "ray": []}
        for round_ in range(args.repeat):
            for target in ("local", "ray") if round_ % 2 == 0 else ("ray", "local"):
                wall, engine, rows, output = run(root / f"{target}-{round_}", target, args)
                runs[target].append((wall, engine, output))
                print(f"{target:>5}: {rows:,} bids, {rows / wall:>12,.0f} events/s over {wall:.2f} s wall, "
                      f"{rows / engine:>12,.0f} events/s over {engine:.2f} s engine time")
        wall = {t: statistics.median(r[0] for r in runs[t]) for t in runs}
        engine = {t: statistics.median(r[1] for r in runs[t]) for t in runs}
        equal = all(r[2] == runs["local"][0][2] for t in runs for r in runs[t])
        print(f"ray / process (medians of {args.repeat}): {wall['local'] / wall['ray']:.2f}x (wall), "
              f"{engine['local'] / engine['ray']:.2f}x (engine); outputs equal: {equal}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()

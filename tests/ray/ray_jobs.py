"""The job every Ray test runs (a tumble into files, a session window and an updating GROUP BY
into views) and how to run it and read its output; the cluster is conftest.py's."""
from __future__ import annotations

from pathlib import Path

import duckdb

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'first-event.rate' = '2000', 'splits' = '2'{events});
CREATE TABLE per_auction (auction BIGINT, window_start TIMESTAMP(3), n BIGINT, top BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO per_auction SELECT auction, window_start, COUNT(*), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND)) GROUP BY auction, window_start, window_end;
CREATE MATERIALIZED VIEW sessions AS SELECT bidder, window_start, window_end, COUNT(*) AS bids, MAX(price) AS top
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '2' SECOND))
GROUP BY bidder, window_start, window_end;
CREATE MATERIALIZED VIEW per_auction_total AS SELECT auction, COUNT(*) AS n, MAX(price) AS top, SUM(price) AS total
FROM bids GROUP BY auction;
"""
EVENTS = 8_000
#: The rate of a test that kills at an early checkpoint: a kill at checkpoint 2 (0.2 s of events in,
#: at batches of 200) comes with about 1.8 s of the job to come, not after a loaded machine's
#: sources have read everything (then no restart comes).
PACED = 4_000
#: weir's restart strategy, restarting at once, as often as a test kills.
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "4",
            "restart-strategy.fixed-delay.delay": "0s"}


def run(tmp: Path, parallelism: int, *, target: str = "ray", events: int | None = EVENTS, batch_size: int = 600,
        rate: int | None = None, settings: dict | None = None, **options):
    """Run the job; at a ``rate`` (nexmark's 'rate', events per second of wall clock), its sources
    cannot run ahead of the checkpoints: ``EVENTS / rate`` seconds after a kill at an early
    checkpoint are still to come, however loaded the machine."""
    bounds = (f", 'events' = '{events}'" if events else "") + (f", 'rate' = '{rate}'" if rate else "")
    sql = JOB.format(events=bounds, out=tmp / "out")
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": str(batch_size),
                "weir.checkpointing.interval-batches": "4", "execution.target": target, **(settings or {})}
    script = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings)
    return run_job(script.graph, JobOptions(state_dir=tmp / "state", **options))


def output(tmp: Path) -> dict[str, list]:
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        views = {view: con.sql(f"SELECT * FROM {view} ORDER BY ALL").fetchall()
                 for view in ("sessions", "per_auction_total")}
    finally:
        con.close()
    files = duckdb.sql(f"SELECT * FROM read_csv('{tmp / 'out'}/*.csv') ORDER BY ALL").fetchall()
    return {"per_auction": files, **views}


def restarts(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "restarting from its latest checkpoint" in w]

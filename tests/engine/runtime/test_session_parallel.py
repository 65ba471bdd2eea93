"""SESSION windows at parallelism 2 give the output of one worker, checkpointing as they go."""
from __future__ import annotations

from pathlib import Path

import duckdb

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'first-event.rate' = '2000', 'splits' = '2', 'events' = '30000');
CREATE MATERIALIZED VIEW bidder_sessions AS
SELECT bidder, window_start, window_end, COUNT(*) AS bids, MAX(price) AS top, COUNT(DISTINCT auction) AS auctions
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '2' SECOND))
GROUP BY bidder, window_start, window_end;
"""


def run(tmp: Path, parallelism: int):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "1000",
                "weir.checkpointing.interval-batches": "3"}
    script = plan_script(parse(JOB), db_path=str(tmp / "views.duckdb"), settings=settings)
    result = run_job(script.graph, JobOptions(state_dir=tmp / "state"))
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        return con.sql("SELECT * FROM bidder_sessions ORDER BY ALL").fetchall(), result
    finally:
        con.close()


def test_session_windows_at_parallelism_two_equal_one_worker(tmp_path):
    one, single = run(tmp_path / "p1", 1)
    two, parallel = run(tmp_path / "p2", 2)
    assert len(one) > 100
    assert two == one
    assert parallel.counter("late_rows_dropped") == single.counter("late_rows_dropped")
    rows_in = {m.id: m.rows_in for m in parallel.operators}
    assert rows_in == {m.id: m.rows_in for m in single.operators}

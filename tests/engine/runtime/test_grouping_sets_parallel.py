"""GROUPING SETS at parallelism 2: the copies of a row (one per set, numbered `_e`) are hashed
with their set's keys, so every set's groups are whole in one worker; the output equals one
worker's, and each late row is counted once however many sets copy it."""
from __future__ import annotations

from pathlib import Path

import duckdb

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'first-event.rate' = '2000', 'splits' = '2', 'events' = '30000');
CREATE MATERIALIZED VIEW channel_cube AS
SELECT window_start, window_end, channel, auction % 5 AS bucket, GROUPING_ID(channel, auction % 5) AS gid,
       COUNT(*) AS bids, MAX(price) AS top, COUNT(DISTINCT bidder) AS bidders
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '4' SECOND))
GROUP BY window_start, window_end, CUBE (channel, auction % 5);
"""


def run(tmp: Path, parallelism: int):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "1000",
                "weir.checkpointing.interval-batches": "3"}
    script = plan_script(parse(JOB), db_path=str(tmp / "views.duckdb"), settings=settings)
    result = run_job(script.graph, JobOptions(state_dir=tmp / "state"))
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        return con.sql("SELECT * FROM channel_cube ORDER BY ALL").fetchall(), result
    finally:
        con.close()


def test_grouping_sets_at_parallelism_two_equal_one_worker(tmp_path):
    one, single = run(tmp_path / "p1", 1)
    two, parallel = run(tmp_path / "p2", 2)
    assert {row[4] for row in one} == {0, 1, 2, 3}  # every set of the CUBE has rows
    assert two == one
    # Each worker expands every row (it reads them all), then keeps its key groups' copies.
    aggregate = "channel_cube.window_aggregate"
    assert [m.rows_in for m in parallel.operators if m.id == aggregate] == \
        [m.rows_in for m in single.operators if m.id == aggregate]

"""EXPLAIN shows a window aggregate's two phases (Flink's local-global aggregation) where the
runtime computes it so (``exchange.pre_aggregated``): at parallelism above 1, aggregates that
merge, and 'table.optimizer.agg-phase-strategy' not ONE_PHASE."""
import pytest

from weir.planner.explain import explain
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'bids.parquet', 'format' = 'parquet');
CREATE TABLE out (auction BIGINT, window_start TIMESTAMP(3), n BIGINT, total BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO out SELECT auction, window_start, COUNT({distinct}price), SUM(price)
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;
"""


def plan(parallelism="2", distinct="", **settings):
    graph = plan_script(parse(JOB.format(distinct=distinct)),
                        settings={"parallelism.default": parallelism, **settings}).graph
    return explain(graph)


def test_the_two_phase_plan_names_its_local_and_global_phase():
    text = plan()
    block = text[text.index("out.window_aggregate"):text.index("out.sink")]
    assert ("  phases:    local-global: each subtask of bids.source pre-aggregates its rows per (auction) and\n"
            "             window slice before the exchange by hash(auction); only the partials cross, merged here\n"
            "             ('table.optimizer.agg-phase-strategy' = 'AUTO'; 'ONE_PHASE' sends the rows)\n") in block
    assert "'table.optimizer.agg-phase-strategy' = 'TWO_PHASE'" in plan(**{"table.optimizer.agg-phase-strategy": "two_phase"})


@pytest.mark.parametrize("case", [{"parallelism": "1"}, {"table.optimizer.agg-phase-strategy": "ONE_PHASE"},
                                  {"distinct": "DISTINCT "}])
def test_one_phase_plans_have_no_phases_line(case):
    assert "phases:" not in plan(**case)

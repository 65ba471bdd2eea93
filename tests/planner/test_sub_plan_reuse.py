"""Sub-plan reuse ('table.optimizer.reuse-sub-plan-enabled', on by default, as in Flink): a window
aggregate that repeats another — same input, windows, keys, aggregates — runs once, the second use
picking its columns from the first's output, with the same results; aggregates that differ, or a
setting of 'false', keep both."""
from __future__ import annotations

import duckdb
import pytest

import weir

from weir.planner.planner import plan_script
from weir.sql import parse

CATALOG = """\
CREATE TABLE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '100000', 'first-event.rate' = '2000');
CREATE TABLE out (auction BIGINT, num BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
"""
# Nexmark q5's shape: the bids per auction and window, joined with their maximum per window.
HOT_ITEMS = """
INSERT INTO out SELECT a.auction, a.num FROM (
    SELECT auction, COUNT(*) AS num, window_start AS s, window_end AS e
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end) AS a
JOIN (
    SELECT MAX(c.num) AS maxn, c.s, c.e FROM (
        SELECT COUNT(*) AS num, window_start AS s, window_end AS e
        FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
        GROUP BY auction, window_start, window_end) AS c
    GROUP BY c.s, c.e) AS m
ON a.s = m.s AND a.e = m.e AND a.num >= m.maxn;
"""


def graph(tmp_path, query: str, setting: str | None = None):
    text = CATALOG.format(out=tmp_path / "out") + query
    if setting is not None:
        text = f"SET 'table.optimizer.reuse-sub-plan-enabled' = '{setting}';\n" + text
    return plan_script(parse(text)).graph


def window_aggregates(g) -> list:
    return [n for n in g.nodes if n.kind == "window_aggregate"]


def test_a_repeated_window_aggregate_runs_once_and_the_repeat_reads_it(tmp_path):
    g = graph(tmp_path, HOT_ITEMS)
    hop, maximum = window_aggregates(g)
    (reuse,) = [n for n in g.nodes if n.id.endswith(".reuse")]
    assert reuse.kind == "calc" and reuse.inputs[0].source == hop.id
    assert reuse.config.projection == (("num", '"num"'), ("s", '"s"'), ("e", '"e"'))
    assert [g.node(e.source) for e in maximum.inputs][0].inputs[0].source == reuse.id
    assert len(window_aggregates(graph(tmp_path, HOT_ITEMS, "false"))) == 3


def test_window_aggregates_that_differ_are_not_reused(tmp_path):
    query = HOT_ITEMS.replace("SELECT COUNT(*) AS num, window_start AS s", "SELECT SUM(price) AS num, window_start AS s")
    assert len(window_aggregates(graph(tmp_path, query))) == 3


@pytest.mark.parametrize("parallelism", ["1", "2"])
def test_the_results_are_those_of_both_aggregates(tmp_path, parallelism):
    results = {}
    for setting in ("true", "false"):
        out = tmp_path / setting
        weir.run(CATALOG.format(out=out) + HOT_ITEMS, db=str(tmp_path / f"{setting}.duckdb"),
                 state_dir=tmp_path / f"state-{setting}", settings={"parallelism.default": parallelism,
                                                                    "table.optimizer.reuse-sub-plan-enabled": setting})
        results[setting] = duckdb.sql(f"SELECT * FROM read_csv('{out}/*.csv') ORDER BY ALL").fetchall()
    assert results["true"] == results["false"] and len(results["true"]) > 20

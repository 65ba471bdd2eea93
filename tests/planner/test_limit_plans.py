"""A streaming SELECT ... [ORDER BY ...] LIMIT n: Flink's Limit (append-only) and SortLimit (a Top-N)."""
from __future__ import annotations

import pytest

from weir.engine.operators.limit import LimitConfig
from weir.planner.planner import plan_script
from weir.sql import WeirSqlError, parse

CATALOG = """\
CREATE TABLE bid (auction BIGINT, price BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid');
"""


def plan(statement: str):
    return plan_script(parse(CATALOG + statement)).graph


def problem(statement: str):
    with pytest.raises(WeirSqlError) as raised:
        plan(statement)
    return raised.value.problems[0]


def test_a_select_in_the_shell_with_limit_keeps_the_first_rows_append_only():
    graph = plan("SELECT auction, price FROM bid WHERE price > 10 LIMIT 3;")
    (limit,) = [n for n in graph.nodes if n.kind == "limit"]
    assert limit.config == LimitConfig(limit=3)
    assert [(e.partitioning, e.keys) for e in limit.inputs] == [("hash", ())]  # one subtask counts them all
    (sink,) = graph.consumers(limit.id)
    assert sink[0].kind == "sink" and sink[0].config.changelog is None


def test_order_by_with_limit_is_a_top_n_of_the_whole_stream():
    graph = plan("CREATE MATERIALIZED VIEW v AS SELECT auction, price FROM bid ORDER BY price DESC LIMIT 5;")
    (top,) = [n for n in graph.nodes if n.kind == "top_n"]
    assert top.config.partition_keys == () and top.config.rank_range == (1, 5)
    assert top.config.order_by[0].startswith('"price" DESC')
    assert [name for name, _ in top.config.projection] == ["auction", "price"]  # no rank column


def test_limit_works_over_a_join_and_inside_insert():
    graph = plan("""CREATE TABLE out_t (auction BIGINT, price BIGINT) WITH ('connector' = 'blackhole');
        INSERT INTO out_t SELECT a.auction, b.price FROM bid AS a JOIN bid AS b ON a.auction = b.auction LIMIT 10;""")
    assert [n.kind for n in graph.nodes if n.kind in ("stream_join", "limit")] == ["stream_join", "limit"]


def test_offset_an_updating_input_and_a_non_number_are_refused_with_a_hint():
    assert problem("SELECT * FROM bid LIMIT 3 OFFSET 2;").message.startswith("OFFSET in a streaming query")
    found = problem("SELECT auction, COUNT(*) AS n FROM bid GROUP BY auction LIMIT 3;")
    assert found.message == "LIMIT without ORDER BY over an updating result is not supported"
    assert "ORDER BY ... LIMIT n" in found.hint
    assert "whole number" in problem("SELECT * FROM bid LIMIT 'x';").message

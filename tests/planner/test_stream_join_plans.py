"""Regular joins in the planner: keys, residual conditions, push-down, changelog, state TTL, errors."""
from __future__ import annotations

import pytest

from weir.engine.changelog import ROW_KIND
from weir.planner.explain import explain
from weir.planner.planner import plan_script
from weir.sql import WeirSqlError, parse

CATALOG = """\
CREATE TABLE a (id BIGINT, seller BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'nexmark', 'table' = 'auction');
CREATE TABLE b (auction BIGINT, price BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'nexmark', 'table' = 'bid');
"""


def plan(query: str, settings: dict | None = None):
    return plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};"), settings=settings).graph


def join(graph):
    (node,) = [n for n in graph.nodes if n.kind == "stream_join"]
    return node


def problem(query: str, settings: dict | None = None):
    with pytest.raises(WeirSqlError) as raised:
        plan(query, settings)
    return raised.value.problems[0]


def test_inner_join_of_append_only_inputs_is_append_only_and_filters_each_input_first():
    graph = plan("SELECT a.id, b.price FROM a JOIN b ON a.id = b.auction AND b.price > 10 WHERE a.seller < 5")
    node = join(graph)
    assert node.config.join_type == "inner" and node.config.residual is None
    assert node.config.changelog is False and ROW_KIND not in node.output_schema.names
    assert [(e.partitioning, e.keys) for e in node.inputs] == [("hash", ("id",)), ("hash", ("auction",))]
    filters = sorted(graph.node(e.source).config.filter for e in node.inputs)
    assert filters == ['"price" > 10', '"seller" < 5']
    assert "changelog: append [I]" in explain(graph)


def test_outer_join_keeps_its_condition_and_emits_a_changelog():
    graph = plan("SELECT a.id, b.price FROM a LEFT JOIN b ON a.id = b.auction AND b.ts > a.ts")
    node = join(graph)
    assert node.config.residual == '"ts0" > "ts"'
    assert node.output_schema.names[-1] == ROW_KIND
    (calc, _), = graph.consumers(node.id)
    assert calc.output_schema.names == ["id", "price", ROW_KIND]
    assert "changelog: retract [I,UB,UA,D]" in explain(graph)


def test_comma_join_takes_its_keys_from_where():
    node = join(plan("SELECT a.id FROM a, b WHERE a.id = b.auction AND b.ts BETWEEN a.ts AND a.ts"))
    assert node.config.left.keys == ("id",) and node.config.right.keys == ("auction",)


def test_not_exists_is_an_anti_join_over_the_stream():
    node = join(plan("SELECT id FROM a WHERE NOT EXISTS (SELECT * FROM b WHERE b.auction = a.id)"))
    assert node.config.join_type == "anti" and node.config.changelog is True


def test_state_ttl_from_the_job_and_from_the_hint():
    node = join(plan("SELECT a.id FROM a JOIN b ON a.id = b.auction", {"table.exec.state.ttl": "1 h"}))
    assert node.config.ttl_ms == {"left": 3_600_000, "right": 3_600_000}
    node = join(plan("SELECT /*+ STATE_TTL('b' = '10s') */ a.id FROM a JOIN b ON a.id = b.auction",
                     {"table.exec.state.ttl": "1 h"}))
    assert node.config.ttl_ms == {"left": 3_600_000, "right": 10_000}


def test_state_ttl_hint_naming_no_input_is_refused():
    found = problem("SELECT /*+ STATE_TTL('c' = '1d') */ a.id FROM a JOIN b ON a.id = b.auction")
    assert "STATE_TTL names `c`" in found.message and "`a`, `b`" in found.hint


def test_a_join_without_an_equality_is_refused():
    found = problem("SELECT a.id FROM a JOIN b ON a.ts < b.ts")
    assert "has no equality between them" in found.message and "ON a.id = b.id" in found.hint


def test_a_bad_ttl_is_refused():
    found = problem("SELECT a.id FROM a JOIN b ON a.id = b.auction", {"table.exec.state.ttl": "soon"})
    assert "'table.exec.state.ttl'" in found.message


# -- FOR SYSTEM_TIME AS OF ----------------------------------------------------------------

VERSIONED = CATALOG + """\
CREATE TABLE dims (id BIGINT, name VARCHAR) WITH ('connector' = 'duckdb', 'path' = 'dims.duckdb');
CREATE TABLE versions (id BIGINT, name VARCHAR, ts TIMESTAMP(3)) WITH ('connector' = 'nexmark', 'table' = 'bid');
"""


def plan_versioned(query: str):
    return plan_script(parse(VERSIONED + f"CREATE MATERIALIZED VIEW v AS {query};")).graph


def versioned_problem(query: str):
    with pytest.raises(WeirSqlError) as raised:
        plan_versioned(query)
    return raised.value.problems[0]


def test_as_of_processing_time_is_a_lookup_that_keeps_the_stream_time():
    graph = plan_versioned("SELECT s.id, d.name, s.ts FROM (SELECT *, PROCTIME() AS pt FROM a) s "
                           "JOIN dims FOR SYSTEM_TIME AS OF s.pt AS d ON s.seller = d.id")
    (node,) = [n for n in graph.nodes if n.kind == "lookup_join"]
    assert node.config.keys == ("seller",) and node.config.lookup.keys == ("id",)
    assert not [n for n in graph.nodes if n.kind == "source" and n.config.table == "dims"]
    assert [e.partitioning for e in node.inputs] == ["forward"]


def test_as_of_event_time_is_a_temporal_join_keyed_on_both_sides():
    graph = plan_versioned("SELECT a.id, b.price FROM a JOIN b FOR SYSTEM_TIME AS OF a.ts AS b ON a.id = b.auction")
    (node,) = [n for n in graph.nodes if n.kind == "temporal_join"]
    assert node.config.left.time == "ts" and node.config.right.time == "ts"
    assert [(e.partitioning, e.keys) for e in node.inputs] == [("hash", ("id",)), ("hash", ("auction",))]


def test_a_versioned_table_needs_a_watermark():
    found = versioned_problem("SELECT a.id FROM a JOIN versions FOR SYSTEM_TIME AS OF a.ts AS v ON a.id = v.id")
    assert "has no watermark" in found.message and "WATERMARK FOR" in found.hint


def test_a_lookup_key_of_another_type_is_cast_on_the_stream_side():
    found = versioned_problem("SELECT s.id FROM (SELECT *, PROCTIME() AS pt FROM a) s "
                              "JOIN dims FOR SYSTEM_TIME AS OF s.pt AS d ON CAST(s.id AS VARCHAR) = d.id")
    assert "cannot join" in found.message or "must be its columns" in found.message


def test_a_right_join_as_of_is_refused():
    found = versioned_problem("SELECT a.id FROM a RIGHT JOIN b FOR SYSTEM_TIME AS OF a.ts AS b ON a.id = b.auction")
    assert "INNER or LEFT" in found.message


def _columns(graph):
    node = join(graph)
    return [list(graph.node(e.source).output_schema.names) for e in node.inputs]


def test_each_input_keeps_only_the_columns_the_query_reads():
    graph = plan("SELECT a.id, max(b.price) AS top FROM a, b WHERE a.id = b.auction AND b.ts > a.ts GROUP BY a.id")
    assert _columns(graph) == [["id", "ts"], ["auction", "price", "ts"]]
    # b's own columns are all read: no calc before it
    assert [e.source for e in join(graph).inputs] == ["v.prune", "b.source"]


def test_a_star_keeps_its_relation_whole_and_an_unqualified_name_is_read_where_it_is():
    graph = plan("SELECT a.*, price FROM a JOIN b ON id = auction")
    assert _columns(graph) == [["id", "seller", "ts"], ["auction", "price"]]
    graph = plan("SELECT * FROM a JOIN b ON a.id = b.auction")
    assert _columns(graph) == [["id", "seller", "ts"], ["auction", "price", "ts"]]
    graph = plan("SELECT count(*) AS n FROM a JOIN b ON a.id = b.auction")
    assert _columns(graph) == [["id"], ["auction"]]


def test_an_updating_input_keeps_its_row_kind():
    graph = plan("SELECT a.seller, c.n FROM a JOIN (SELECT auction, count(*) AS n, max(price) AS m FROM b "
                 "GROUP BY auction) c ON a.id = c.auction")
    assert _columns(graph) == [["id", "seller"], ["auction", "n", ROW_KIND]]


def test_an_inner_join_evaluates_the_terms_reading_both_inputs_on_each_pair():
    graph = plan("SELECT a.id, b.price FROM a, b WHERE a.id = b.auction AND b.ts BETWEEN a.ts AND "
                 "a.ts + INTERVAL '1' HOUR AND b.price > a.seller AND a.seller < 5")
    node = join(graph)
    assert node.config.residual == '"ts0" BETWEEN "ts" AND "ts" + INTERVAL \'1\' HOUR AND "price" > "seller"'
    (calc, _), = graph.consumers(node.id)
    assert calc.config.filter is None
    assert graph.node(node.inputs[0].source).config.filter == '"seller" < 5'

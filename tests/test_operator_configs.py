"""Each operator kind has a typed configuration, a frozen dataclass next to its class
(``OperatorKind.Config``, ``engine.operators.config``): the planner builds it, the operator,
EXPLAIN and the exchange read its attributes, and a JobGraph still serialises to the JSON (and
so the fingerprint and the checkpoints' ``state_shape``) it had when configs were dicts."""
from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

import pytest

from weir.engine.graph import JobGraph, OperatorNode
from weir.engine.operators.calc import CalcConfig, Expand
from weir.engine.operators.config import OperatorConfig
from weir.engine.operators.registry import OPERATORS, operator_class
from weir.planner.planner import plan_script
from weir.sql import parse

from golden_plans import plan_golden

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "tests" / "queries"
#: Golden queries that, together, plan every operator kind (planning costs a second each).
COVERING = ("versioned_joins", "streaming_limit", "interval_join_then_window", "over_aggregates",
            "session_bids_per_bidder", "window_topn_rank_per_auction", "window_join_semi_anti",
            "regular_join_append", "debezium_changes", "cte_subqueries", "grouping_sets_suppliers",
            "union_all_clicks", "lateral_table_words")


def _plan(path: Path) -> JobGraph:
    return plan_golden(path)


@pytest.fixture(scope="module")
def planned() -> list[JobGraph]:
    return [_plan(QUERIES / name / "query.sql") for name in COVERING]


def test_the_covering_queries_plan_every_operator_kind(planned):
    assert {n.kind for g in planned for n in g.nodes} >= set(OPERATORS)


def test_every_planned_config_is_its_kinds_dataclass_and_survives_json(planned):
    for graph in planned:
        for node in graph.nodes:
            cls = operator_class(node.kind)
            if cls.Config is not None:
                assert isinstance(node.config, cls.Config), node.id
                assert dataclasses.is_dataclass(node.config) and isinstance(node.config, OperatorConfig)
                again = cls.Config.from_json(json.loads(json.dumps(node.config.to_json())))
                assert again == node.config, node.id
        restored = JobGraph.from_json(json.loads(json.dumps(graph.to_json())))
        assert restored == graph
        assert restored.fingerprint() == graph.fingerprint()
        assert restored.to_json() == graph.to_json()


def test_every_operator_kind_has_a_frozen_config_dataclass():
    for kind, cls in OPERATORS.items():
        assert cls.Config is not None, f"{cls.__name__} has no Config"
        assert dataclasses.is_dataclass(cls.Config) and cls.Config.__dataclass_params__.frozen, kind
        assert issubclass(cls.Config, OperatorConfig), kind
        assert cls.Config.__module__ == cls.__module__, f"{kind}'s Config lives apart from its class"
        names = {f.name for f in dataclasses.fields(cls.Config)}
        assert set(cls.STATE_CONFIG) <= names, f"{kind}: STATE_CONFIG names {set(cls.STATE_CONFIG) - names}"
        for path in cls.keyed_by or ():
            first, *rest = path.split(".")
            assert first in names, (kind, path)
            if rest:  # a side's keys: a field of the side's dataclass
                side = typing.get_type_hints(cls.Config)[first]
                assert rest[0] in {f.name for f in dataclasses.fields(side)}, (kind, path)


def test_the_graph_builder_takes_only_the_kinds_dataclass():
    import pyarrow as pa

    from weir.planner.graph_builder import GraphBuilder

    builder = GraphBuilder(JobGraph("j"))
    with pytest.raises(TypeError, match="CalcConfig, not dict"):
        builder.add("p", "calc", {"projection": [["a", '"a"']], "filter": None}, pa.schema([("a", pa.int64())]), [], "")


#: The configs of ``SMALL``'s operators as the planner wrote them when configs were dicts: the
#: graph's JSON, and so its fingerprint and the state shapes checkpoints record, must not change.
SMALL = """
CREATE TABLE bids (auction BIGINT, price BIGINT, channel VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = 'bids.csv', 'format' = 'csv');
CREATE TABLE out (auction BIGINT, n BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'csv');
INSERT INTO out SELECT auction, COUNT(*) AS n FROM bids WHERE price > 10 AND channel <> 'x'
GROUP BY auction, TUMBLE(ts, INTERVAL '10' SECOND);
"""
SMALL_DICT_CONFIGS = {
    "out.calc": {"projection": [["auction", '"auction"'], ["price", '"price"'], ["channel", '"channel"'],
                                ["ts", '"ts"']],
                 "filter": "\"price\" > 10 AND \"channel\" <> 'x'"},
    "out.window_aggregate": {"window": {"kind": "tumble", "time_column": "ts", "size": 10_000_000, "offset": 0},
                             "keys": [["auction", '"auction"']],
                             "aggregates": [{"name": "_agg0", "function": "count", "argument": None,
                                             "distinct": False, "filter": None}],
                             "having": None, "projection": [["auction", '"auction"'], ["n", '"_agg0"']]},
}


def test_a_graphs_json_and_fingerprint_are_those_of_its_dict_configs(tmp_path):
    graph = plan_script(parse(SMALL), db_path=str(tmp_path / "w.duckdb")).graph
    dict_form = JobGraph(graph.name, [dataclasses.replace(n, config=SMALL_DICT_CONFIGS.get(n.id, n.config_json()))
                                      for n in graph.nodes], graph.settings)
    assert set(SMALL_DICT_CONFIGS) <= {n.id for n in graph.nodes}
    assert graph.to_json() == dict_form.to_json()
    assert graph.fingerprint() == dict_form.fingerprint()
    for node in graph.nodes:
        cls = operator_class(node.kind)
        assert cls.state_shape(node.config) == cls.state_shape(dict_form.node(node.id).config), node.id


def test_a_config_is_typed_at_plan_time():
    config = CalcConfig(projection=[["a", '"a"']], expand={"column": "_set", "count": 2})
    assert config.projection == (("a", '"a"'),) and config.filter is None
    assert config.expand == Expand(column="_set", count=2)
    assert config.to_json() == {"projection": [["a", '"a"']], "filter": None, "expand": {"column": "_set", "count": 2}}
    assert "expand" not in CalcConfig(projection=[["a", '"a"']]).to_json()  # left out as the dict left it out
    with pytest.raises(TypeError, match="projection"):
        CalcConfig(filter="true")  # a missing field
    with pytest.raises(TypeError, match="projections"):
        CalcConfig(projections=[])  # a misspelt one
    with pytest.raises(TypeError, match="has no field 'projections'"):
        CalcConfig.from_json({"projections": []})
    with pytest.raises(TypeError, match="count"):
        CalcConfig(projection=[], expand={"column": "_set"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.filter = "false"


def test_an_operator_node_serialises_its_config_and_reads_it_back():
    import pyarrow as pa

    node = OperatorNode("p.calc", "calc", CalcConfig(projection=[["a", '"a" + 1']]), pa.schema([("a", pa.int64())]))
    data = json.loads(json.dumps(node.to_json()))
    assert data["config"] == {"projection": [["a", '"a" + 1']], "filter": None}
    assert OperatorNode.from_json(data) == node

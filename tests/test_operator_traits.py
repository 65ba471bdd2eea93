"""A fact about an operator lives on the operator: every kind declares its traits on its class
(``engine.operators.base.OperatorKind``), and the runtime, the exchange, the coordinator and
EXPLAIN ask the class instead of keeping lists of kinds."""
from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pyarrow as pa
import pytest

from weir.engine.graph import Edge, OperatorNode
from weir.engine.operators.base import Operator, OperatorKind
from weir.engine.operators.registry import KINDS, OPERATORS, operator_class
from weir.engine.operators.window_aggregate import WindowAggregateConfig
from weir.engine.runtime.exchange import carries_key_groups, needed_columns, routing

from golden_plans import plan_golden

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ROOT / "tests" / "queries"
BOOLEAN_TRAITS = ("merges_snapshots", "windowed", "late_rows_table", "drops_late_rows", "holds_watermark_back",
                  "pre_aggregates", "takes_key_groups", "commits_output", "reads_source")
#: Modules that ask an operator's class and must not name kinds themselves (planner/late_rows.py
#: adds the late-rows table's sink: it may name that kind, the one it emits).
ASKING = {**{path: set() for path in sorted((ROOT / "engine" / "runtime").glob("*.py"))},
          ROOT / "engine" / "checkpoint" / "coordinator.py": set(), ROOT / "planner" / "explain.py": set(),
          ROOT / "planner" / "late_rows.py": {"sink"}}


def _overrides(cls: type, name: str) -> bool:
    """Whether ``cls`` defines ``name`` below the base class (by where it is defined, which also
    holds for a classmethod, a new bound method at every lookup)."""
    base = Operator if issubclass(cls, Operator) else OperatorKind
    owner = next(c for c in cls.__mro__ if name in vars(c))
    return not issubclass(base, owner)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_declares_its_traits(kind):
    cls = operator_class(kind)
    assert issubclass(cls, OperatorKind)
    assert "explain" in vars(cls), f"{cls.__name__} renders no EXPLAIN lines of its own"
    for trait in BOOLEAN_TRAITS:
        assert isinstance(getattr(cls, trait), bool), trait
    assert cls.arrival_watermark in (None, "use", "pass")
    assert cls.keyed_by is None or all(isinstance(path, str) and path for path in cls.keyed_by)
    # The declarations agree with the hooks the class has.
    assert cls.merges_snapshots == _overrides(cls, "merge_snapshots")
    if issubclass(cls, Operator):
        assert cls.pre_aggregates == _overrides(cls, "pre_aggregate") == _overrides(cls, "combines")
        assert cls.holds_watermark_back == _overrides(cls, "output_watermark")
    assert cls.stateful() == cls.merges_snapshots  # every stateful operator restores at any parallelism
    assert not cls.keyed() or cls.stateful()
    assert not cls.windowed or cls.drops_late_rows
    assert not cls.late_rows_table or cls.windowed
    assert not cls.takes_key_groups or cls.keyed()
    assert cls.commits_output == (kind == "sink") and cls.reads_source == (kind == "source")
    assert (kind in OPERATORS) == (not cls.commits_output and not cls.reads_source)


#: Golden queries that, together, plan every kind (a few: planning costs a second each).
COVERING = ("versioned_joins", "streaming_limit", "interval_join_then_window", "over_aggregates",
            "session_bids_per_bidder", "window_topn_rank_per_auction", "window_join_semi_anti",
            "regular_join_append", "debezium_changes", "cte_subqueries", "lateral_table_words")


def _planned_nodes():
    for path in (QUERIES / name / "query.sql" for name in COVERING):
        yield from plan_golden(path).nodes


def test_planned_configs_hold_what_the_classes_declare():
    """In every node the planner makes for the golden queries, the config entries a keyed class
    names hold its keys, and the class renders its key and state lines from that config."""
    seen = set()
    for node in _planned_nodes():
        cls = operator_class(node.kind)
        seen.add(node.kind)
        for index in range(len(cls.keyed_by or ())):
            entry = node.config
            for part in cls.keyed_by[index].split("."):
                entry = entry[part] if isinstance(entry, dict) else getattr(entry, part)
            assert isinstance(entry, (list, tuple)), (node.id, cls.keyed_by[index])
        assert [line.split(":")[0] for line in cls.explain(node.config)] == ["key", "state"]
    assert seen == set(KINDS), f"no golden query plans {sorted(set(KINDS) - seen)}"


def test_the_exchange_asks_the_operator():
    """Routing, the columns that cross and the key groups that travel come from the class."""
    schema = pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("ts", pa.timestamp("us"))])
    window = WindowAggregateConfig(keys=[["auction", '"auction"']], window={"kind": "tumble", "time_column": "ts", "size": 10},
                                   aggregates=[{"name": "n", "function": "count", "argument": None}], projection=[["n", "n"]])
    node = OperatorNode("counts", "window_aggregate", window, schema)
    assert routing(node, Edge("a", "forward")) == ()  # keyed: every edge is an exchange
    assert routing(OperatorNode("c", "calc", {}, schema), Edge("a", "forward")) is None
    assert routing(OperatorNode("l", "limit", {"limit": 3}, schema), Edge("a", "forward")) == ()
    assert carries_key_groups(node, ("auction",)) and not carries_key_groups(node, ("bidder",))
    assert not carries_key_groups(OperatorNode("g", "group_aggregate", window.to_json(), schema), ("auction",))
    assert needed_columns(node, schema) == ["auction", "ts"]
    late = OperatorNode("counts", "window_aggregate", dataclasses.replace(window, late_rows={"0": []}), schema)
    assert needed_columns(late, schema) is None  # a late-rows table keeps the rows as they came


def _string_constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


@pytest.mark.parametrize("path", ASKING, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_that_asks_names_operator_kinds(path):
    assert _string_constants(path) & set(KINDS) == ASKING[path]


def test_the_lists_of_kinds_are_gone():
    pattern = re.compile(r"\b(KEYED_KINDS|STATEFUL_KINDS|_?WINDOWED)\b|getattr\([^)]*\"(merge_snapshots|combinable|"
                         r"pre_aggregate|arrival_watermark)\"|late_rows_dropped\[")
    offenders = [f"{path.relative_to(ROOT)}:{number}" for package in ("engine", "planner", "shell")
                 for path in sorted((ROOT / package).rglob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []

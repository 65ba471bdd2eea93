"""The planner's modules form layers: shared basics (errors, calc, aggregate_calls, expressions,
...) below the features, the dispatcher (planner/queries.py) above them, every import at the
top of its file. An import inside a function hides a circle instead of cutting it."""
from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import weir.planner
from weir.planner.planner import plan_script
from weir.planner.planning import QueryPlanning
from weir.planner.queries import QueryPlanner
from weir.sql import parse

PLANNER = Path(weir.planner.__file__).parent


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PLANNER.rglob("*.py")):
        parts = path.relative_to(PLANNER).with_suffix("").parts
        name = ".".join(("weir", "planner", *parts[:-1], *([] if parts[-1] == "__init__" else parts[-1:])))
        out[name] = ast.parse(path.read_text(), str(path))
    return out


def _type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _run_time_imports(module: ast.Module) -> list[ast.ImportFrom | ast.Import]:
    """The imports a module runs when it is imported: at its top level, outside ``if TYPE_CHECKING``."""
    out = []
    for statement in module.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            out.append(statement)
        elif isinstance(statement, (ast.If, ast.Try)) and not _type_checking(statement):
            out.extend(n for n in ast.walk(statement) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return out


def _planner_targets(statement: ast.ImportFrom | ast.Import, modules: dict[str, ast.Module]) -> set[str]:
    if isinstance(statement, ast.Import):
        return {a.name for a in statement.names if a.name in modules}
    assert statement.level == 0, "the planner imports by absolute weir.planner names"
    base = statement.module or ""
    targets = {base} if base in modules else set()
    targets |= {f"{base}.{a.name}" for a in statement.names if f"{base}.{a.name}" in modules}
    return targets


def test_no_planner_module_imports_inside_a_function():
    found = []
    for name, module in _modules().items():
        for node in ast.walk(module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found += [f"{name}:{n.lineno}" for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert found == []


def test_the_module_level_import_graph_has_no_cycle():
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, module in modules.items():
        for statement in _run_time_imports(module):
            graph[name] |= _planner_targets(statement, modules) - {name}
    assert graph["weir.planner.queries"] >= {"weir.planner.joins", "weir.planner.errors"}  # the graph is read
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        raise AssertionError(f"planner modules import each other in a circle: {error.args[1]}") from None
    assert order.index("weir.planner.errors") < order.index("weir.planner.joins") < order.index("weir.planner.queries")


def test_no_planner_module_imports_another_for_type_checking_only():
    """A feature names the planner that calls it by a Protocol below it (``planner.planning``),
    not by importing the dispatcher under ``if TYPE_CHECKING`` (a circle hidden from the runtime)."""
    modules = _modules()
    found = [f"{name}:{statement.lineno}" for name, module in modules.items() for statement in module.body
             if _type_checking(statement)
             for node in ast.walk(statement) if isinstance(node, (ast.Import, ast.ImportFrom))
             and _planner_targets(node, modules)]
    assert found == []


def test_the_import_graph_with_annotations_has_no_cycle():
    """Every import of a planner module by another, wherever it is (a type annotation's too)."""
    modules = _modules()
    graph = {name: set() for name in modules}
    for name, module in modules.items():
        for node in ast.walk(module):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name] |= _planner_targets(node, modules) - {name}
    assert "weir.planner.planning" in graph["weir.planner.joins"]  # the features name the Protocol
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"planner modules import each other in a circle: {error.args[1]}") from None


def test_the_query_planner_is_what_the_features_ask_for():
    """``QueryPlanner`` has every member of the Protocol the features name it by."""
    missing = [name for name in dir(QueryPlanning) if not name.startswith("_") and not hasattr(QueryPlanner, name)]
    attributes = [name for name in QueryPlanning.__annotations__
                  if name not in vars(QueryPlanner("catalog", "builder", {}, (1, 1)))]
    assert missing == [] and attributes == []


def test_no_private_name_is_imported_from_another_planner_module():
    modules = _modules()
    found = [f"{name}: {statement.module}.{alias.name}"
             for name, module in modules.items() for statement in ast.walk(module)
             if isinstance(statement, ast.ImportFrom) and (statement.module or "").startswith("weir.planner")
             for alias in statement.names
             if alias.name.startswith("_") and f"{statement.module}.{alias.name}" not in modules]
    assert found == []


CATALOG = """\
CREATE TABLE a (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE b (id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'nexmark', 'table' = 'bid');
"""
JOINS = {
    "interval_join": "SELECT a.id FROM a JOIN b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE",
    "stream_join": "SELECT a.id FROM a JOIN b ON a.id = b.id",
    "window_join": ("SELECT l.id FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS l "
                    "JOIN TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS r "
                    "ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.id = r.id"),
}


@pytest.mark.parametrize("kind", sorted(JOINS))
def test_a_join_plans_each_input_once(kind, monkeypatch):
    """plan_join plans both inputs, then classifies the join (no scratch planning to find out)."""
    planned = []
    plan_relation = QueryPlanner.plan_relation
    monkeypatch.setattr(QueryPlanner, "plan_relation",
                        lambda self, relation, pipeline: planned.append(relation.name) or plan_relation(
                            self, relation, pipeline))
    graph = plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW out AS {JOINS[kind]};")).graph
    assert [n.kind for n in graph.nodes].count(kind) == 1
    assert sorted(planned) == ["a", "b"]

"""Planning window joins: two windowed inputs joined on window_start, window_end and keys.

Flink's window join. Accepted spellings:

- ``FROM <windowed L> [INNER | LEFT | RIGHT | FULL] JOIN <windowed R> ON L.window_start =
  R.window_start AND L.window_end = R.window_end AND L.k = R.k ...``;
- SEMI: ``WHERE (k, window_start, window_end) IN (SELECT k, window_start, window_end FROM <R>)``
  or ``WHERE EXISTS (SELECT * FROM <R> WHERE L.k = R.k AND L.window_start = R.window_start ...)``;
- ANTI: the same with ``NOT IN`` (a NULL key matches anything, as SQL's NOT IN) or ``NOT EXISTS``.

A windowed input is anything whose window_start and window_end come from one
window: a window table function, a SELECT over one, or a window aggregate
(Nexmark q7, q8: ``window_start AS starttime`` is followed through the plan).
Both inputs must use the same window; any window works, since the operator
only sees rows that already carry their window's bounds.

Plan: ``planner/joins/__init__.py`` plans both inputs and finds the key equalities
(``planner/joins/conditions.py``); a join is a window join when an equality names a
window bound of an input (``is_window_join``); a ``window_join`` node joins both; the
outer projection and WHERE become a ``calc`` over its output. An inner join's other ON
terms and WHERE terms that are plain comparisons of columns and constants (Nexmark q5's
``num >= maxn``) filter in the join itself, as Flink's join condition does, so that the
rows they reject never leave it (``pushed_condition``).
"""
from __future__ import annotations

from sqlglot import exp

from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.engine.sql_eval import INPUT
from weir.planner.changelog import require_append_only
from weir.planner.errors import PlanError
from weir.planner.expressions import bind, contains_aggregate, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.joins.conditions import JoinPlanner
from weir.planner.joins.scope import (DESCRIBED_TYPES, JoinScope, Pair, Relation, left_bounds, output_names,
                                      project_joined)
from weir.planner.windows import same_window

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
window_join = LazyModule("weir.engine.operators.window_join")

BOUNDS = ("window_start", "window_end")
#: What a term the join filters by may be made of: columns, constants, comparisons, arithmetic
#: that cannot fail and logic — never a function (a Python UDF's bad rows are the calc's).
PUSHABLE_NODES = (exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Paren, exp.Not, exp.And,
                  exp.Or, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Is, exp.Add, exp.Sub, exp.Neg)
REGULAR_JOIN_HINT = ("a window join equates both L.window_start = R.window_start and "
                     "L.window_end = R.window_end, a regular join neither; for an interval join, bound one "
                     "input's time attribute by the other's: R.ts BETWEEN L.ts - INTERVAL '1' HOUR AND "
                     "L.ts + INTERVAL '10' MINUTE")


def is_window_join(planner: JoinPlanner, pairs: list[Pair], left: Relation, right: Relation) -> bool:
    """Whether an equality names a window bound of either input (else: a regular join)."""
    for pair in pairs:
        for relation, expression in ((left, pair.left), (right, pair.right)):
            if isinstance(expression, exp.Column):
                role = relation.stream.window_bound(expression.name)
                if role and role[0] in BOUNDS:
                    return True
    return False


def _split_pairs(planner: JoinPlanner, pairs: list[Pair], left: Relation, right: Relation):
    """The pairs that equate window_start and window_end, and the key pairs."""
    bounds: dict[str, tuple[str, str]] = {}
    windows: dict[str, tuple] = {}
    keys = []
    for pair in pairs:
        roles = [r.stream.window_bound(e.name) if isinstance(e, exp.Column) else None
                 for r, e in ((left, pair.left), (right, pair.right))]
        role_names = [r[0] if r and r[0] in BOUNDS else None for r in roles]
        if role_names[0] is None and role_names[1] is None:
            keys.append(pair)
            continue
        if role_names[0] != role_names[1]:
            planner.problems.append(planner.problem(
                f"`{pair.node.sql()}` equates {role_names[0] or 'a column'} of `{left.alias}` with "
                f"{role_names[1] or 'a column'} of `{right.alias}`", pair.node,
                "join window_start with window_start and window_end with window_end"))
            continue
        bounds[role_names[0]] = (pair.left.name, pair.right.name)
        windows[role_names[0]] = (roles[0][1], roles[1][1])
    if planner.problems:
        return None, None
    missing = [b for b in BOUNDS if b not in bounds]
    if missing:
        planner.problems.append(planner.problem(
            f"the join of `{left.alias}` and `{right.alias}` has no equality on "
            f"{' and '.join(missing)}: weir runs window joins only", planner.select.args.get("joins", [None])[0]
            if planner.select.args.get("joins") else planner.select, REGULAR_JOIN_HINT))
        return None, None
    left_window, right_window = windows["window_start"]
    if not same_window(left_window, right_window):
        planner.problems.append(planner.problem(
            f"the inputs of a window join use different windows: `{left.alias}` {left_window.describe()}, "
            f"`{right.alias}` {right_window.describe()}", planner.select,
            "window both inputs with the same window function, size and offset"))
        return None, None
    return bounds, keys


def plan_window_join(planner: JoinPlanner, join_type: str, left: Relation, right: Relation, pairs: list[Pair],
                     remaining: list[exp.Expression], null_aware: bool) -> Stream:
    """The ``window_join`` of two windowed inputs and the projection over it."""
    qp, select = planner.qp, planner.select
    for relation in (left, right):
        require_append_only(qp, relation.stream, "a window join", select)
    for unsupported, what in (("group", "GROUP BY"), ("having", "HAVING")):
        if select.args.get(unsupported):
            raise qp.fail(f"{what} over a window join is not supported yet", select.args[unsupported],
                          "join in a subquery and aggregate in the query around it")
    pushed: list[exp.Expression] = []
    if join_type == "inner":  # the other ON terms filter the joined rows, as in Flink
        remaining = [*(term for term, _ in planner.residual), *remaining]
        pushed = [term for term in remaining if _pushable(term)]
        remaining = [term for term in remaining if not _pushable(term)]
    else:
        planner.problems.extend(problem for _, problem in planner.residual if problem is not None)
    if planner.problems:
        raise PlanError(planner.problems)
    bounds, key_pairs = _split_pairs(planner, pairs, left, right)
    if planner.problems:
        raise PlanError(planner.problems)
    left_keys, right_keys = planner.key_columns(key_pairs, left, right)
    if planner.problems:
        raise PlanError(planner.problems)

    right.output_names = output_names(left.stream.schema.names, right.stream.schema.names)
    scope = JoinScope([left] if join_type in ("semi", "anti") else [left, right], qp.fallback)
    window = left.stream.window_bound(bounds["window_start"][0])[1].describe()
    condition = pushed_condition(planner, pushed, scope)
    config = window_join.WindowJoinConfig(
        join_type=join_type,
        null_aware=null_aware,
        condition=condition,
        left=window_join.WindowJoinSide(columns=left.stream.schema.names, keys=left_keys,
                                        window_start=bounds["window_start"][0], window_end=bounds["window_end"][0]),
        right=window_join.WindowJoinSide(columns=right.stream.schema.names, keys=right_keys,
                                         window_start=bounds["window_start"][1], window_end=bounds["window_end"][1]),
    )
    description = (
        f"WindowJoin(joinType=[{DESCRIBED_TYPES[join_type]}{', null-aware' if null_aware else ''}], "
        f"window=[{window}], leftKeys=[{', '.join(left_keys)}], rightKeys=[{', '.join(right_keys)}]"
        f"{f', where=[{condition}]' if condition else ''})"
    )
    edges = [Edge(r.stream.node_id, "hash", tuple(k)) if k else Edge(r.stream.node_id)
             for r, k in ((left, left_keys), (right, right_keys))]
    node = qp.builder.add(planner.pipeline, "window_join", config, scope.schema, edges, description)
    joined = Stream(node.id, scope.schema, frozenset(), f"{left.alias} JOIN {right.alias}",
                    window_columns=left_bounds(left))
    return project_joined(qp, select, joined, scope, remaining, planner.pipeline)


def _pushable(term: exp.Expression) -> bool:
    return not contains_aggregate(term) and all(isinstance(node, PUSHABLE_NODES) for node in term.walk())


def pushed_condition(planner: JoinPlanner, terms: list[exp.Expression], scope: JoinScope) -> str | None:
    """The terms an inner window join filters its joined rows by, as DuckDB SQL over its output
    columns (``WindowJoinConfig.condition``); None without any."""
    if not terms:
        return None
    problems: list = []
    condition = " AND ".join(to_duckdb(bind(term, scope, problems), scope.schema) for term in terms)
    if problems:
        raise PlanError(problems)
    planner.qp.describe(f"SELECT 1 FROM {INPUT} WHERE {condition}", scope.schema, planner.select)
    return condition

"""Planning interval joins: two append-only inputs joined on keys and a time interval.

Flink's interval join::

    FROM a [INNER | LEFT | RIGHT | FULL] JOIN b
    ON a.id = b.id AND b.ts BETWEEN a.ts - INTERVAL '1' HOUR AND a.ts + INTERVAL '10' MINUTE

The interval may also be written with ``>=``, ``>``, ``<=``, ``<`` (strict
bounds stay strict) or ``=`` between the two inputs' time attributes, each
side a time attribute plus or minus intervals. Both a lower and an upper
bound are needed; every bound must compare the same two time attributes.
A SELECT is an interval join when its ON compares a time attribute of one
input with one of the other (``is_interval_join``, asked by ``planner/joins/__init__.py``
once it planned both inputs); otherwise it is a window or regular join.

Plan: key expressions are computed before a hash edge on each side
(``planner/joins/conditions.py``), after a
filter by the ON's conditions on that input alone (either input of an INNER
join, the NULL-padded input of an outer one); an ``interval_join`` node joins
both; the projection, WHERE and, for an INNER join, the ON's other conditions
become a ``calc`` over its output. The
output holds the left columns, then the right ones (a clashing right name
gets a suffix, as in window joins); both time columns stay time attributes,
and the operator holds the watermark back by the interval's reach.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope, bind, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.joins.conditions import JoinPlanner
from weir.planner.joins.scope import (DESCRIBED_TYPES, JoinScope, Relation, conjuncts, join_clause, left_bounds,
                                      output_names, project_joined)
from weir.planner.planning import QueryPlanning
from weir.planner.windows import format_duration as _format_duration
from weir.sql.errors import Problem, WeirSqlError
from weir.sql.intervals import interval_micros

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
interval_join = LazyModule("weir.engine.operators.interval_join")

_COMPARISONS = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=", exp.EQ: "="}
_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "="}
EXAMPLE = "b.ts BETWEEN a.ts - INTERVAL '1' HOUR AND a.ts + INTERVAL '10' MINUTE"


@dataclass
class _Bound:
    """``right.time - left.time <op> offset`` (µs), from ``node`` of the ON clause."""

    op: str
    offset: int
    left_time: str
    right_time: str
    node: exp.Expression


def format_duration(us: int) -> str:
    return _format_duration(us) if us else "0 s"


def _comparisons(term: exp.Expression) -> list[tuple[str, exp.Expression, exp.Expression]] | None:
    while isinstance(term, exp.Paren):
        term = term.this
    if isinstance(term, exp.Between):
        return [(">=", term.this, term.args["low"]), ("<=", term.this, term.args["high"])]
    op = _COMPARISONS.get(type(term))
    return [(op, term.this, term.expression)] if op else None


def _linear(node: exp.Expression, scope: JoinScope, time_attributes: bool = True) -> tuple[int, str, int] | None:
    """(input index, time attribute, offset µs) for ``ts``, ``ts + INTERVAL ...``, ``ts - INTERVAL ...``;
    without ``time_attributes``, any timestamp column will do."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
        located = scope.locate(node, [])
        if located is None:
            return None
        index, declared = located
        stream = scope.relations[index].stream
        if declared not in stream.time_attributes and (
                time_attributes or not pa.types.is_timestamp(stream.schema.field(declared).type)):
            return None
        return index, declared, 0
    if isinstance(node, (exp.Add, exp.Sub)):
        sign = 1 if isinstance(node, exp.Add) else -1
        for column, interval, s in ((node.this, node.expression, sign), (node.expression, node.this, 1)):
            if isinstance(interval, exp.Interval) and (s == 1 or column is node.this):
                inner = _linear(column, scope, time_attributes)
                if inner is None:
                    return None
                try:
                    return inner[0], inner[1], inner[2] + s * interval_micros(interval)
                except WeirSqlError:
                    return None
    return None


def time_bounds(term: exp.Expression, scope: JoinScope, time_attributes: bool = True) -> list[_Bound] | None:
    """The bounds a conjunct of ON puts on ``right.time - left.time``, or None when it is no
    comparison between a time attribute (any timestamp, without ``time_attributes``) of each input."""
    comparisons = _comparisons(term)
    if not comparisons:
        return None
    out = []
    for op, a, b in comparisons:
        if op == "=" and not time_attributes:
            return None  # equal timestamps that are no time attributes: window bounds or keys
        la, lb = _linear(a, scope, time_attributes), _linear(b, scope, time_attributes)
        if la is None or lb is None or {la[0], lb[0]} != {0, 1}:
            return None
        if la[0] == 1:  # right.t + oa <op> left.t + ob
            out.append(_Bound(op, lb[2] - la[2], lb[1], la[1], term))
        else:  # left.t + oa <op> right.t + ob  <=>  right.t - left.t <flipped op> oa - ob
            out.append(_Bound(_FLIPPED[op], la[2] - lb[2], la[1], lb[1], term))
    return out


def is_interval_join(qp: QueryPlanning, on: exp.Expression, left: Relation, right: Relation) -> bool:
    """True when ON bounds a time attribute of one input from both sides by one of the other."""
    if not any(_comparisons(t) for t in conjuncts(on)):
        return False
    scope = JoinScope([left, right], qp.fallback)
    # Both bounds are needed, as in Flink: a join bounded on one side only (or on timestamps
    # that carry no watermark) is a regular join with that condition.
    bounds = [b for t in conjuncts(on) for b in (time_bounds(t, scope) or [])]
    return any(b.op in (">", ">=", "=") for b in bounds) and any(b.op in ("<", "<=", "=") for b in bounds)


def plan_interval_join(planner: JoinPlanner, left: Relation, right: Relation) -> Stream:
    """The ``interval_join`` of two planned inputs of ``FROM a JOIN b ON ...``."""
    qp, select, pipeline = planner.qp, planner.select, planner.pipeline
    for unsupported, what in (("group", "GROUP BY"), ("having", "HAVING"), ("order", "ORDER BY"),
                              ("limit", "LIMIT"), ("distinct", "DISTINCT")):
        if select.args.get(unsupported):
            raise qp.fail(f"{what} over an interval join is not supported", select.args[unsupported],
                          "join in a subquery and window or aggregate its rows in the query around it")
    join_type, _, condition = join_clause(qp, select.args["joins"][0])
    for relation in (left, right):
        if not relation.stream.append_only:
            raise qp.fail(f"an interval join over an updating stream (the result of `{relation.alias}`) is not "
                          "supported; its rows may change after they were joined", select,
                          "join the append-only inputs and aggregate the joined rows instead")
    scope = JoinScope([left, right], qp.fallback)
    bounds, equalities, residual, problems = _split_condition(qp, condition, scope)
    if problems:
        raise PlanError(problems)
    lower, upper = _interval(qp, bounds, scope, problems)
    residual = _push_down(qp, residual, scope, join_type, problems, pipeline, select)
    pairs = planner.pairs_from_condition(exp.and_(*equalities), scope) if equalities else []
    problems += planner.problems
    if problems:
        raise PlanError(problems)
    left_keys, right_keys = planner.key_columns(pairs, left, right)
    if planner.problems:
        raise PlanError(planner.problems)
    right.output_names = output_names(left.stream.schema.names, right.stream.schema.names)
    scope = JoinScope([left, right], qp.fallback)
    left_time, right_time = bounds[0].left_time, bounds[0].right_time
    config = interval_join.IntervalJoinConfig(
        join_type=join_type,
        lower=lower[0], lower_strict=lower[1], upper=upper[0], upper_strict=upper[1],
        left=interval_join.IntervalJoinSide(columns=left.stream.schema.names, keys=left_keys, time=left_time),
        right=interval_join.IntervalJoinSide(columns=right.stream.schema.names, keys=right_keys, time=right_time),
    )
    right_out = right.output_names[right.stream.schema.names.index(right_time)]
    interval = (f"{right_out} - {left_time} {'>' if lower[1] else '>='} {format_duration(lower[0])} "
                f"AND {right_out} - {left_time} {'<' if upper[1] else '<='} {format_duration(upper[0])}")
    description = (f"IntervalJoin(joinType=[{DESCRIBED_TYPES[join_type]}], interval=[{interval}], "
                   f"leftKeys=[{', '.join(left_keys)}], rightKeys=[{', '.join(right_keys)}])")
    edges = [Edge(r.stream.node_id, "hash", tuple(k)) if k else Edge(r.stream.node_id)
             for r, k in ((left, left_keys), (right, right_keys))]
    node = qp.builder.add(pipeline, "interval_join", config, scope.schema, edges, description)
    joined = Stream(node.id, scope.schema, frozenset({left_time, right_out}), f"{left.alias} JOIN {right.alias}",
                    window_columns=left_bounds(left))

    where = select.args.get("where")
    return project_joined(qp, select, joined, scope, ([where.this] if where is not None else []) + residual, pipeline)


def _split_condition(qp: QueryPlanning, condition: exp.Expression, scope: JoinScope):
    """The ON's conjuncts as time bounds, key equalities and other conditions, and the problems:
    a bound on a timestamp that is no time attribute is one."""
    bounds: list[_Bound] = []
    equalities: list[exp.Expression] = []
    residual: list[exp.Expression] = []
    problems: list[Problem] = []
    for term in conjuncts(condition):
        found = time_bounds(term, scope)
        if found:
            bounds.extend(found)
        elif time_bounds(term, scope, time_attributes=False):
            column = next(c for c in term.find_all(exp.Column) if not _linear(c, scope))
            index, declared = scope.locate(column, [])
            relation = scope.relations[index]
            problems.append(qp.fail(
                f"`{column.sql()}` is not a time attribute of `{relation.alias}`: an interval join bounds "
                "the event times of its inputs", column,
                f"declare a watermark on it (WATERMARK FOR {declared} AS {declared} - INTERVAL '5' SECOND), "
                f"or compare time attributes: {', '.join(sorted(relation.stream.time_attributes)) or 'none'}"
            ).problems[0])
        elif isinstance(term, exp.EQ) and _compares_the_inputs(term, scope):
            equalities.append(term)
        else:
            residual.append(term)
    return bounds, equalities, residual, problems


#: The inputs whose rows a condition on them alone may filter before the join: the inner join's
#: both, an outer join's side that is padded with NULLs (its kept side's rows must come out anyway).
_FILTERABLE = {"inner": (0, 1), "left": (1,), "right": (0,), "full": ()}


def _push_down(qp: QueryPlanning, residual: list[exp.Expression], scope: JoinScope, join_type: str,
               problems: list[Problem], pipeline: str, select: exp.Select) -> list[exp.Expression]:
    """Filter each input by the ON's conditions on it alone (a calc before the exchange, so less
    state); what is left filters the joined rows of an INNER join, and is refused for an outer one."""
    pushed: dict[int, list[exp.Expression]] = {0: [], 1: []}
    left_over = []
    for term in residual:
        sides = {found[0] if found else -1 for found in (scope.locate(c, []) for c in term.find_all(exp.Column))}
        if len(sides) == 1 and next(iter(sides)) in _FILTERABLE[join_type]:
            pushed[next(iter(sides))].append(term)
        elif join_type == "inner":
            left_over.append(term)
        else:
            problems.append(qp.fail(
                f"the condition `{term.sql()}` of a {join_type.upper()} interval join is neither a key equality, "
                "a time bound nor a filter of the input padded with NULLs", term,
                "filter the other input in a subquery, or use an INNER join (its other conditions filter the "
                "joined rows)").problems[0])
    for index, terms in pushed.items():
        if not terms:
            continue
        relation = scope.relations[index]
        own = Scope(relation.stream.schema, relation.alias, qp.fallback)
        filter_sql = to_duckdb(bind(exp.and_(*terms), own, problems), relation.stream.schema)
        if not problems:
            relation.stream = qp.plan_pre_aggregate(relation.stream, filter_sql, [], pipeline, select)
    return left_over


def _compares_the_inputs(term: exp.EQ, scope: JoinScope) -> bool:
    """True for ``l = r`` where one side reads only the left input and the other only the right
    (a key equality); an equality within one input (``a.w = 0``) filters instead."""
    def sides(operand: exp.Expression) -> set[int]:
        located = [scope.locate(c, []) for c in operand.find_all(exp.Column)]
        return {found[0] if found else -1 for found in located}

    return {frozenset(sides(term.this)), frozenset(sides(term.expression))} == {frozenset({0}), frozenset({1})}


def _interval(qp: QueryPlanning, bounds: list[_Bound], scope: JoinScope,
              problems: list[Problem]) -> tuple[tuple[int, bool], tuple[int, bool]]:
    """The tightest (offset, strict) lower and upper bound of ``right.time - left.time``."""
    first = bounds[0]
    for bound in bounds[1:]:
        if (bound.left_time, bound.right_time) != (first.left_time, first.right_time):
            problems.append(qp.fail(
                f"the interval join's bounds compare different time attributes: `{first.left_time}` with "
                f"`{first.right_time}`, and `{bound.left_time}` with `{bound.right_time}`", bound.node,
                "bound one time attribute of each input by the other").problems[0])
            break
    lowers = [(b.offset, b.op == ">") for b in bounds if b.op in (">", ">=", "=")]
    uppers = [(b.offset, b.op == "<") for b in bounds if b.op in ("<", "<=", "=")]
    # the tightest: the largest lower bound (strict before inclusive), the smallest upper one
    lower = max(lowers, default=None)
    upper = min(uppers, key=lambda u: (u[0], not u[1]), default=None)
    missing = [name for name, b in (("lower", lower), ("upper", upper)) if b is None]
    if missing:
        node = first.node
        problems.append(qp.fail(
            f"the interval join of `{scope.relations[0].alias}` and `{scope.relations[1].alias}` has no "
            f"{' and no '.join(missing)} bound on `{first.right_time}`: its state would grow without end",
            node, f"bound the time from both sides: {EXAMPLE}").problems[0])
        return (0, False), (0, False)
    if lower[0] > upper[0] or (lower[0] == upper[0] and (lower[1] or upper[1])):
        problems.append(qp.fail(
            f"the interval join's bounds leave no interval: {format_duration(lower[0])} to "
            f"{format_duration(upper[0])}", first.node, "the lower bound must not exceed the upper one").problems[0])
    return lower, upper

"""Planning joins: ``plan_join`` plans both inputs once, then classifies the join.

1. ``JOIN t FOR SYSTEM_TIME AS OF s.x``: a temporal join (``s.x`` an event-time attribute)
   or a lookup join (processing time), ``versioned.py``; the table of a lookup is never
   planned as a stream.
2. Otherwise both inputs are planned (``conditions.JoinPlanner.plan_side``): the relations
   of ``FROM a JOIN b``, ``FROM a, b``, or the outer relation and an ``IN`` / ``EXISTS``
   subquery (``subqueries.py``); each input of a JOIN then keeps only the columns the query
   reads (``pruning.py``).
3. A single ``JOIN ... ON`` bounding a time attribute of one input from both sides by one
   of the other is an interval join (``interval.py``).
4. An equality naming a window bound of an input makes a window join (``window.py``); any
   other join is a regular join (``regular.py``).

``scope.py`` holds what they share: ``Relation``, ``JoinScope``, ``Pair``, the JOIN clause,
and the projection over a join's output.
"""
from __future__ import annotations


from sqlglot import exp

from weir.planner.errors import PlanError
from weir.planner.graph_builder import Stream
from weir.planner.joins.conditions import JoinPlanner
from weir.planner.joins.interval import is_interval_join, plan_interval_join
from weir.planner.joins.pruning import prune
from weir.planner.joins.regular import plan_regular_join
from weir.planner.joins.scope import JoinScope, Relation, conjuncts, join_clause, output_names, subquery_predicate
from weir.planner.joins.subqueries import comma_condition, exists_side, in_side
from weir.planner.joins.versioned import is_versioned_join, plan_versioned_join
from weir.planner.joins.window import is_window_join, plan_window_join
from weir.planner.planning import QueryPlanning
from weir.sql.errors import WeirSqlError

__all__ = ["is_join", "output_names", "plan_join"]


def is_join(select: exp.Select) -> bool:
    """True when the SELECT joins: a JOIN in FROM, or an IN / EXISTS subquery in WHERE."""
    if select.args.get("joins"):
        return True
    where = select.args.get("where")
    return where is not None and any(subquery_predicate(c) for c in conjuncts(where.this))


def plan_join(qp: QueryPlanning, select: exp.Select, pipeline: str) -> Stream:
    """Plan a SELECT that joins (``is_join``)."""
    if is_versioned_join(select):
        return plan_versioned_join(qp, select, pipeline)
    planner = JoinPlanner(qp, select, pipeline)
    joins = select.args.get("joins") or []
    if not joins:
        _check_join_query(qp, select)
        return _plan_equi_join(planner, *_subquery_inputs(planner))
    if len(joins) == 1 and joins[0].args.get("on") is not None:  # ON may bound time: an interval join?
        left, right = _plan_inputs(qp, planner, select)
        prune(qp, select, [left, right], pipeline)
        if is_interval_join(qp, joins[0].args["on"], left, right):
            return plan_interval_join(planner, left, right)
        _check_join_query(qp, select)
        join_type, _, condition = join_clause(qp, joins[0])
    else:  # FROM a, b; JOIN ... USING; more than one JOIN
        _check_join_query(qp, select)
        join_type, right_node, condition = join_clause(qp, joins[0])
        left, right = planner.plan_side(select.args["from_"].this), planner.plan_side(right_node)
        prune(qp, select, [left, right], pipeline)
    where = select.args.get("where")
    remaining = conjuncts(where.this) if where is not None else []
    scope = JoinScope([left, right], qp.fallback)
    if condition is None:  # FROM a, b WHERE ...: the WHERE terms reading both inputs join them
        condition, remaining = comma_condition(remaining, scope)
    pairs = planner.pairs_from_condition(condition, scope)
    return _plan_equi_join(planner, join_type, left, right, pairs, remaining, False)


def _plan_inputs(qp: QueryPlanning, planner: JoinPlanner, select: exp.Select) -> tuple[Relation, Relation]:
    """Both inputs of ``FROM a JOIN b ON ...``; when one cannot be planned, what is wrong with the
    query around them is reported first."""
    try:
        return planner.plan_side(select.args["from_"].this), planner.plan_side(select.args["joins"][0].this)
    except WeirSqlError as error:
        failed = error
    _check_join_query(qp, select)
    join_clause(qp, select.args["joins"][0])
    raise failed


def _check_join_query(qp: QueryPlanning, select: exp.Select) -> None:
    """What a window or regular join does not support around it."""
    for unsupported, what in (("with", "WITH"), ("order", "ORDER BY"), ("limit", "LIMIT"), ("distinct", "DISTINCT")):
        if select.args.get(unsupported):
            raise qp.fail(f"{what} over a join is not supported yet", select.args[unsupported],
                          "join in a subquery and aggregate in the query around it")
    joins = select.args.get("joins") or []
    if len(joins) > 1:
        raise qp.fail("a SELECT may join two inputs; join a third in a query around it", joins[1])


def _subquery_inputs(planner: JoinPlanner):
    """(join type, left, right, pairs, WHERE terms left, null-aware) of a SEMI or ANTI join
    written as ``[NOT] IN`` or ``[NOT] EXISTS``."""
    qp, select = planner.qp, planner.select
    remaining = conjuncts(select.args["where"].this)
    chosen = [(c, p) for c, p in ((c, subquery_predicate(c)) for c in remaining) if p]
    if len(chosen) > 1:
        raise qp.fail("one IN or EXISTS subquery per SELECT is supported", chosen[1][0])
    term, (join_type, predicate) = chosen[0]
    remaining = [c for c in remaining if c is not term]
    left = planner.plan_side(select.args["from_"].this)
    if isinstance(predicate, exp.Exists):
        right, pairs = exists_side(planner, left, predicate)
        return join_type, left, right, pairs, remaining, False
    right, pairs = in_side(planner, left, predicate)
    return join_type, left, right, pairs, remaining, join_type == "anti"


def _plan_equi_join(planner: JoinPlanner, join_type: str, left: Relation, right: Relation, pairs, remaining,
                    null_aware: bool) -> Stream:
    """A window join when an equality names a window bound of an input, else a regular join."""
    if planner.problems:
        raise PlanError(planner.problems)
    if is_window_join(planner, pairs, left, right):
        return plan_window_join(planner, join_type, left, right, pairs, remaining, null_aware)
    return plan_regular_join(planner, join_type, left, right, pairs, remaining, null_aware)

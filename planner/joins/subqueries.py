"""The inputs of a join written without JOIN ... ON: ``FROM a, b WHERE ...`` (the WHERE terms
reading both inputs join them) and ``[NOT] IN`` / ``[NOT] EXISTS`` subqueries (SEMI and ANTI
joins, the subquery the right input)."""
from __future__ import annotations

from sqlglot import exp

from weir.planner.joins.conditions import JoinPlanner
from weir.planner.joins.scope import JoinScope, Pair, Relation, conjuncts
from weir.sql.errors import Problem


def comma_condition(terms: list[exp.Expression], scope: JoinScope) -> tuple[exp.Expression, list[exp.Expression]]:
    """For ``FROM a, b WHERE ...``: the WHERE terms that read both inputs (the join condition),
    and the others (a filter of the joined rows)."""
    joining, rest = [], []
    for term in terms:
        read = {located[0] for column in term.find_all(exp.Column)
                if (located := scope.locate(column, [])) is not None}
        (joining if len(read) == 2 else rest).append(term)
    return (exp.and_(*joining) if joining else exp.true()), rest


def in_side(planner: JoinPlanner, left: Relation, predicate: exp.In) -> tuple[Relation, list[Pair]]:
    """``(a, b, c) IN (SELECT x, y, z FROM ...)``: the subquery is the right input, paired by position."""
    query = predicate.args["query"]
    right_stream = planner.qp.plan_query(query.this if isinstance(query, exp.Subquery) else query,
                                         planner.pipeline)
    right = Relation("subquery", right_stream, list(right_stream.schema.names), list(right_stream.schema.names))
    operand = predicate.this
    items = operand.expressions if isinstance(operand, exp.Tuple) else [operand]
    if len(items) != len(right_stream.schema):
        raise planner.fail(f"IN compares {len(items)} values with a subquery of {len(right_stream.schema)} "
                           "columns", predicate)
    scope = JoinScope([left], planner.qp.fallback)
    pairs = []
    for item, name in zip(items, right_stream.schema.names):
        bound = planner.side_of(item, scope)
        if isinstance(bound, Problem):
            planner.problems.append(bound)
        elif bound is not None:
            pairs.append(Pair(bound[1], exp.column(name, quoted=True), item))
    return right, pairs


def exists_side(planner: JoinPlanner, left: Relation,
                 predicate: exp.Exists) -> tuple[Relation, list[Pair]]:
    """``EXISTS (SELECT ... FROM R WHERE <L = R equalities> AND <conditions on R>)``: R filtered by
    its own conditions is the right input; the equalities are the join condition."""
    query = predicate.this
    if isinstance(query, exp.Subquery):
        query = query.this
    if not isinstance(query, exp.Select) or query.args.get("joins") or query.args.get("group"):
        raise planner.fail("EXISTS needs a subquery reading one windowed input", predicate,
                           "EXISTS (SELECT * FROM R WHERE L.k = R.k AND L.window_start = R.window_start "
                           "AND L.window_end = R.window_end)")
    where = query.args.get("where")
    terms = conjuncts(where.this) if where is not None else []
    outer_alias = left.alias.lower()
    correlated = [t for t in terms if any((c.table or "").lower() == outer_alias for c in t.find_all(exp.Column))]
    local = [t for t in terms if t not in correlated]
    right = planner.plan_side(query.args["from_"].this, local)
    scope = JoinScope([left, right], planner.qp.fallback)
    condition = exp.and_(*correlated) if correlated else exp.true()
    return right, planner.pairs_from_condition(condition, scope) if correlated else []

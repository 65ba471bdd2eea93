"""Planning the inputs of a join and reading its condition, for every kind of join.

Each input is planned with ``QueryPlanner`` as any relation (a window table function or a
filtered one as ``SELECT * FROM ...``); the condition's equalities between the inputs become
``Pair``s, and key expressions (and keys of two different types, cast to a common one) are
computed by a ``calc`` before the hash edge on the keys.
"""
from __future__ import annotations


import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND
from weir.engine.sql_eval import INPUT
from weir.planner.expressions import position, to_duckdb
from weir.planner.joins.scope import JoinScope, Pair, Relation, conjuncts
from weir.planner.planning import QueryPlanning
from weir.planner.types import sql_name
from weir.sql.errors import Problem
from weir.sql.statements import WindowTVF


class JoinPlanner:
    """Plans the inputs of a join and reads its condition: the equalities between the inputs
    (``Pair``s, their keys computed before the exchange) and the other terms (``residual``)."""


    def __init__(self, qp: QueryPlanning, select: exp.Select, pipeline: str):
        self.qp, self.select, self.pipeline = qp, select, pipeline
        self.problems: list[Problem] = []
        #: Join condition terms that are not equalities between the inputs, with the problem
        #: a window join reports for each.
        self.residual: list[tuple[exp.Expression, Problem | None]] = []

    def fail(self, message: str, node: exp.Expression | None, hint: str | None = None):
        return self.qp.fail(message, node, hint)

    # -- the two inputs -------------------------------------------------------
    def plan_side(self, relation: exp.Expression, where: list[exp.Expression] | None = None) -> Relation:
        alias_node = relation.args.get("alias")
        plain = relation.copy()
        plain.set("alias", None)
        if isinstance(plain, WindowTVF) or where:
            query = exp.select("*").from_(plain)
            if where:
                query = query.where(exp.and_(*where))
            stream = self.qp.plan_query(query, self.pipeline)
        else:
            stream = self.qp.plan_relation(plain, self.pipeline)
        if alias_node is not None and alias_node.name:
            alias = alias_node.name
        elif isinstance(relation, exp.Table):
            alias = relation.name
        else:
            alias = stream.name
        visible = [n for n in stream.schema.names if n != ROW_KIND]  # the row kind is no column to select
        return Relation(alias, stream, list(stream.schema.names), visible)

    # -- the condition ---------------------------------------------------------
    def pairs_from_condition(self, condition: exp.Expression, scope: JoinScope) -> list[Pair]:
        """The equalities between the two inputs; every other term goes to ``self.residual``
        (a regular join evaluates them, a window join refuses them)."""
        pairs = []
        for term in conjuncts(condition):
            if not isinstance(term, exp.EQ):
                self.residual.append((term, self.problem(
                    f"the window join condition `{term.sql()}` is not an equality", term,
                    "a window join's ON holds equalities between the two inputs only; filter the "
                    "joined rows in WHERE, or each input in a subquery",
                )))
                continue
            sides = [self.side_of(operand, scope) for operand in (term.this, term.expression)]
            mixed = [side for side in sides if isinstance(side, Problem)]
            if mixed:  # an operand reads both inputs: not a key, a condition on the pair
                self.residual.append((term, mixed[0]))
                continue
            if None in sides:
                continue
            (lside, lexpr), (rside, rexpr) = sides
            if {lside, rside} != {0, 1}:
                self.residual.append((term, self.problem(
                    f"`{term.sql()}` does not compare a column of `{scope.relations[0].alias}` with one "
                    f"of `{scope.relations[1].alias}`", term,
                    "a window join's ON holds equalities between the two inputs; filter one input "
                    "in a subquery or the joined rows in WHERE",
                )))
                continue
            pairs.append(Pair(lexpr, rexpr, term) if lside == 0 else Pair(rexpr, lexpr, term))
        return pairs

    def side_of(self, operand: exp.Expression, scope: JoinScope) -> tuple[int, exp.Expression] | Problem | None:
        """The one relation ``operand`` reads (-1 for none: a constant), and ``operand`` bound to that
        relation's columns; the problem when it reads both; None when a column is unknown (the
        problem is in ``self.problems``)."""
        found: set[int] = set()
        problems_before = len(self.problems)

        def rewrite(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
                located = scope.locate(node, self.problems)
                if located is None:
                    return node
                found.add(located[0])
                return exp.column(located[1], quoted=True)
            return node

        bound = operand.copy().transform(rewrite)
        if len(self.problems) > problems_before:
            return None
        if not found:
            return -1, bound  # a constant: the caller says what it should compare
        if len(found) != 1:
            return self.problem(f"`{operand.sql()}` must read exactly one input of the join", operand,
                                "each side of a join equality reads one input: L.k = R.k")
        return found.pop(), bound

    def problem(self, message: str, node: exp.Expression, hint: str | None = None) -> Problem:
        line, col = position(node, self.qp.fallback)
        return Problem(message, line, col, hint)

    # -- keys before the exchange ------------------------------------------------
    def key_columns(self, pairs: list[Pair], left: Relation, right: Relation) -> tuple[list[str], list[str]]:
        """Key columns of each side, computing expressions and casts in a calc before the exchange."""
        computed: list[list[list[str]]] = [[], []]
        names: list[list[str]] = [[], []]
        for i, pair in enumerate(pairs):
            types = [self._type_of(e, r) for e, r in ((pair.left, left), (pair.right, right))]
            cast = common_type(*types)
            if cast is False:
                self.problems.append(self.problem(
                    f"cannot join {sql_name(types[0])} with {sql_name(types[1])} in `{pair.node.sql()}`",
                    pair.node, "CAST one side to the other's type"))
                continue
            for side, (expression, relation) in enumerate(((pair.left, left), (pair.right, right))):
                if isinstance(expression, exp.Column) and cast is None:
                    names[side].append(expression.name)
                    continue
                sql = to_duckdb(expression, relation.stream.schema)
                name = f"_jk{i}"
                computed[side].append([name, f"CAST(({sql}) AS {cast})" if cast else sql])
                names[side].append(name)
        for side, relation in enumerate((left, right)):
            if computed[side] and not self.problems:
                relation.stream = self.qp.plan_pre_aggregate(relation.stream, None, computed[side],
                                                             self.pipeline, self.select)
                relation.output_names = list(relation.stream.schema.names)
        return names[0], names[1]

    def _type_of(self, expression: exp.Expression, relation: Relation) -> pa.DataType:
        if isinstance(expression, exp.Column):
            return relation.stream.schema.field(expression.name).type
        sql = to_duckdb(expression, relation.stream.schema)
        return self.qp.describe(f"SELECT {sql} AS k FROM {INPUT}", relation.stream.schema, expression).field(0).type


def common_type(left: pa.DataType, right: pa.DataType) -> str | None | bool:
    """None: no cast needed; a DuckDB type both sides are cast to; False: no common type."""
    if left == right:
        return None
    if pa.types.is_integer(left) and pa.types.is_integer(right):
        return None  # integers hash alike whatever their width (engine.state.key_groups)
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
    if any(t(left) for t in numeric) and any(t(right) for t in numeric):
        return "DOUBLE"
    if pa.types.is_string(left) and pa.types.is_large_string(right) or (
            pa.types.is_large_string(left) and pa.types.is_string(right)):
        return "VARCHAR"
    return False

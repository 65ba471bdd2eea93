"""What every join shares: its two inputs (``Relation``) and the scope naming their columns
(``JoinScope``), the equalities of its condition (``Pair``), its JOIN clause, and the projection
over its output (``project_joined``).

The join's output holds the left columns, then the right ones (a right name already taken gets
a suffix: ``num0``, as Flink does); ``L.num`` and ``R.num`` resolve through ``JoinScope``.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from weir.planner.expressions import Scope, contains_aggregate, position
from weir.planner.graph_builder import Stream
from weir.planner.group_aggregate import plan_group_aggregate
from weir.planner.planning import QueryPlanning
from weir.sql.errors import Problem

OUTER_SIDES = {"": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}
DESCRIBED_TYPES = {"inner": "InnerJoin", "left": "LeftOuterJoin", "right": "RightOuterJoin",
                   "full": "FullOuterJoin", "semi": "LeftSemiJoin", "anti": "LeftAntiJoin"}


def conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def subquery_predicate(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """('semi' | 'anti', the IN or EXISTS) for ``[NOT] IN (SELECT ...)`` and ``[NOT] EXISTS``."""
    negated = isinstance(node, exp.Not)
    inner = node.this if negated else node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Exists) or (isinstance(inner, exp.In) and inner.args.get("query") is not None):
        return ("anti" if negated else "semi"), inner
    return None


@dataclass
class Relation:
    """One input of a join: its alias, its stream, and the names its columns have in the join output."""

    alias: str
    stream: Stream
    output_names: list[str]
    #: Columns that ``*`` shows (not the computed join keys).
    visible: list[str]


class JoinScope(Scope):
    """Columns of two relations: ``L.num`` names the left one; an unqualified name must be
    unique across both."""

    def __init__(self, relations: list[Relation], fallback: tuple[int, int] | None):
        fields = [f.with_name(out) for r in relations for f, out in zip(r.stream.schema, r.output_names)]
        super().__init__(pa.schema(fields), " and ".join(r.alias for r in relations), fallback)
        self.relations = relations

    def locate(self, column: exp.Column, problems: list[Problem]) -> tuple[int, str] | None:
        """(relation index, declared column of that relation) for a reference, or a problem."""
        line, col = position(column, self.fallback)
        if column.table:
            found = [i for i, r in enumerate(self.relations) if r.alias.lower() == column.table.lower()]
            if not found:
                aliases = ", ".join(f"`{r.alias}`" for r in self.relations)
                problems.append(Problem(f"unknown table `{column.table}` in `{column.sql()}`", line, col,
                                        f"the query reads {aliases}"))
                return None
            candidates = [(found[0], self._declared(found[0], column.name))]
        else:
            candidates = [(i, self._declared(i, column.name)) for i in range(len(self.relations))]
        candidates = [(i, name) for i, name in candidates if name is not None]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            relation = self.relations[found[0]] if column.table else None
            names = relation.visible if relation else [n for r in self.relations for n in r.visible]
            where = " and ".join(f"`{r.alias}`" for r in ([relation] if relation else self.relations))
            problems.append(Problem(f"unknown column `{column.name}` in {where}", line, col,
                                    f"{where} has columns: {', '.join(names)}"))
            return None
        both = " and ".join(f"`{self.relations[i].alias}.{name}`" for i, name in candidates)
        problems.append(Problem(f"column `{column.name}` is ambiguous: {both}", line, col,
                                f"qualify it: {both.replace(' and ', ' or ')}"))
        return None

    def _declared(self, index: int, name: str) -> str | None:
        lowered = name.lower()
        return next((c for c in self.relations[index].stream.schema.names if c.lower() == lowered), None)

    def resolve_column(self, column: exp.Column, problems: list[Problem]) -> str | None:
        located = self.locate(column, problems)
        if located is None:
            return None
        index, declared = located
        relation = self.relations[index]
        return relation.output_names[relation.stream.schema.names.index(declared)]

    def resolve(self, name: str) -> str | None:
        problems: list[Problem] = []
        return self.resolve_column(exp.column(name), problems)

    def star(self, item: exp.Expression) -> list[exp.Expression]:
        """``*`` or ``L.*`` as columns, each named as in the join output."""
        table = item.table if isinstance(item, exp.Column) else ""
        out: list[exp.Expression] = []
        for relation in self.relations:
            if table and relation.alias.lower() != table.lower():
                continue
            for name in relation.visible:
                output = relation.output_names[relation.stream.schema.names.index(name)]
                out.append(exp.alias_(exp.column(name, table=relation.alias, quoted=True), output, quoted=True))
        return out


def left_bounds(left: Relation) -> dict:
    """The window bounds of a join's output (``Stream.window_columns``): the left input's, under
    their names in the output."""
    return {out: left.stream.window_columns[name] for name, out in zip(left.stream.schema.names, left.output_names)
            if name in left.stream.window_columns}


def output_names(left: list[str], right: list[str]) -> list[str]:
    """The right names, renamed where the left (or an earlier right one) took them: ``num0``, ``num1``."""
    taken = {n.lower() for n in left}
    out = []
    for name in right:
        candidate, n = name, 0
        while candidate.lower() in taken:
            candidate, n = f"{name}{n}", n + 1
        taken.add(candidate.lower())
        out.append(candidate)
    return out


@dataclass
class Pair:
    """One equality of the join condition: a left expression, a right one, where it was written."""

    left: exp.Expression
    right: exp.Expression
    node: exp.Expression


def project_joined(qp: QueryPlanning, select: exp.Select, joined: Stream, scope: JoinScope, remaining: list[exp.Expression],
                   pipeline: str) -> Stream:
    """The SELECT list and the WHERE terms left over, as a calc over the join's output."""
    outer = select.copy()
    outer.set("joins", None)
    outer.set("where", exp.Where(this=exp.and_(*remaining)) if remaining else None)
    items = []
    for item in outer.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            items.extend(scope.star(item))
        else:
            items.append(item)
    outer.set("expressions", items)
    if outer.args.get("group") is not None or any(contains_aggregate(e) for e in
                                                    [*outer.expressions, outer.args.get("having") or exp.Null()]):
        # GROUP BY over the join: updating
        return plan_group_aggregate(qp, outer, joined, scope, pipeline)
    return qp.plan_calc(outer, joined, scope, pipeline)


def join_clause(qp: QueryPlanning, join: exp.Join) -> tuple[str, exp.Expression, exp.Expression]:
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    if kind in ("CROSS",) or side not in OUTER_SIDES or kind not in ("", "INNER", "OUTER"):
        raise qp.fail(f"{' '.join(filter(None, (side, kind)))} JOIN is not supported", join,
                      "window joins are INNER, LEFT, RIGHT or FULL [OUTER] JOIN ... ON, or IN / EXISTS subqueries")
    condition = join.args.get("on")
    if condition is None and (side or kind):
        raise qp.fail(f"{' '.join(filter(None, (side, kind)))} JOIN needs ON", join,
                      "join on equalities between the inputs: ... JOIN b ON a.k = b.k")
    return OUTER_SIDES[side], join.this, condition

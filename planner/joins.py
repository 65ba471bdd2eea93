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

Plan: each side is planned with ``QueryPlanner`` as any relation; key
expressions (and keys of two different types, cast to a common one) are
computed by a ``calc`` before a hash edge on the keys; a ``window_join`` node
joins both; the outer projection and WHERE become a ``calc`` over its output.
The join's output holds the left columns, then the right ones (a right name
already taken gets a suffix: ``num0``, as Flink does); ``L.num`` and ``R.num``
resolve through ``JoinScope``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND
from weir.engine.graph import Edge
from weir.engine.sql_eval import INPUT
from weir.planner.changelog import require_append_only
from weir.planner.expressions import Scope, contains_aggregate, position, quote, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.types import sql_name
from weir.planner.windows import same_window, window_bound
from weir.sql.errors import Problem
from weir.sql.statements import WindowTVF

if TYPE_CHECKING:
    from weir.planner.queries import QueryPlanner

OUTER_SIDES = {"": "inner", "LEFT": "left", "RIGHT": "right", "FULL": "full"}
DESCRIBED_TYPES = {"inner": "InnerJoin", "left": "LeftOuterJoin", "right": "RightOuterJoin",
                   "full": "FullOuterJoin", "semi": "LeftSemiJoin", "anti": "LeftAntiJoin"}
BOUNDS = ("window_start", "window_end")
REGULAR_JOIN_HINT = ("a window join equates both L.window_start = R.window_start and "
                     "L.window_end = R.window_end, a regular join neither; for an interval join, bound one "
                     "input's time attribute by the other's: R.ts BETWEEN L.ts - INTERVAL '1' HOUR AND "
                     "L.ts + INTERVAL '10' MINUTE")


def is_window_join(select: exp.Select) -> bool:
    """True when the SELECT joins: a JOIN in FROM, or an IN / EXISTS subquery in WHERE."""
    if select.args.get("joins"):
        return True
    where = select.args.get("where")
    return where is not None and any(_subquery_predicate(c) for c in conjuncts(where.this))


def conjuncts(node: exp.Expression) -> list[exp.Expression]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return conjuncts(node.this) + conjuncts(node.expression)
    return [node]


def _subquery_predicate(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """('semi' | 'anti', the IN or EXISTS) for ``[NOT] IN (SELECT ...)`` and ``[NOT] EXISTS``."""
    negated = isinstance(node, exp.Not)
    inner = node.this if negated else node
    while isinstance(inner, exp.Paren):
        inner = inner.this
    if isinstance(inner, exp.Exists) or (isinstance(inner, exp.In) and inner.args.get("query") is not None):
        return ("anti" if negated else "semi"), inner
    return None


# -- scopes ---------------------------------------------------------------------------


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


# -- planning -------------------------------------------------------------------------------


@dataclass
class _Pair:
    """One equality of the join condition: a left expression, a right one, where it was written."""

    left: exp.Expression
    right: exp.Expression
    node: exp.Expression


class _WindowJoinPlanner:
    def __init__(self, qp: "QueryPlanner", select: exp.Select, pipeline: str):
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
    def pairs_from_condition(self, condition: exp.Expression, scope: JoinScope) -> list[_Pair]:
        """The equalities between the two inputs; every other term goes to ``self.residual``
        (a regular join evaluates them, a window join refuses them)."""
        pairs = []
        for term in conjuncts(condition):
            if not isinstance(term, exp.EQ):
                self.residual.append((term, self._problem(
                    f"the window join condition `{term.sql()}` is not an equality", term,
                    "a window join's ON holds equalities between the two inputs only; filter the "
                    "joined rows in WHERE, or each input in a subquery",
                )))
                continue
            before = len(self.problems)
            sides = [self._side_of(operand, scope) for operand in (term.this, term.expression)]
            mixed = [p for p in self.problems[before:] if p.message.endswith("must read exactly one input of the join")]
            if mixed:  # an operand reads both inputs: not a key, a condition on the pair
                self.problems[before:] = [p for p in self.problems[before:] if p not in mixed]
                self.residual.append((term, mixed[0]))
                continue
            if None in sides:
                continue
            (lside, lexpr), (rside, rexpr) = sides
            if {lside, rside} != {0, 1}:
                self.residual.append((term, self._problem(
                    f"`{term.sql()}` does not compare a column of `{scope.relations[0].alias}` with one "
                    f"of `{scope.relations[1].alias}`", term,
                    "a window join's ON holds equalities between the two inputs; filter one input "
                    "in a subquery or the joined rows in WHERE",
                )))
                continue
            pairs.append(_Pair(lexpr, rexpr, term) if lside == 0 else _Pair(rexpr, lexpr, term))
        return pairs

    def windowed(self, pairs: list[_Pair], left: Relation, right: Relation) -> bool:
        """Whether an equality names a window bound of either input (else: a regular join)."""
        for pair in pairs:
            for relation, expression in ((left, pair.left), (right, pair.right)):
                if isinstance(expression, exp.Column):
                    role = window_bound(self.qp.builder, relation.stream.node_id, expression.name)
                    if role and role[0] in BOUNDS:
                        return True
        return False

    def _side_of(self, operand: exp.Expression, scope: JoinScope) -> tuple[int, exp.Expression] | None:
        """The one relation ``operand`` reads, and ``operand`` bound to that relation's columns."""
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
            self.problems.append(self._problem(
                f"`{operand.sql()}` must read exactly one input of the join", operand,
                "each side of a join equality reads one input: L.k = R.k"))
            return None
        return found.pop(), bound

    def _problem(self, message: str, node: exp.Expression, hint: str | None = None) -> Problem:
        line, col = position(node, self.qp.fallback)
        return Problem(message, line, col, hint)

    def split_pairs(self, pairs: list[_Pair], left: Relation, right: Relation):
        """The pairs that equate window_start and window_end, and the key pairs."""
        bounds: dict[str, tuple[str, str]] = {}
        windows: dict[str, tuple] = {}
        keys = []
        for pair in pairs:
            roles = [window_bound(self.qp.builder, r.stream.node_id, e.name) if isinstance(e, exp.Column) else None
                     for r, e in ((left, pair.left), (right, pair.right))]
            role_names = [r[0] if r and r[0] in BOUNDS else None for r in roles]
            if role_names[0] is None and role_names[1] is None:
                keys.append(pair)
                continue
            if role_names[0] != role_names[1]:
                self.problems.append(self._problem(
                    f"`{pair.node.sql()}` equates {role_names[0] or 'a column'} of `{left.alias}` with "
                    f"{role_names[1] or 'a column'} of `{right.alias}`", pair.node,
                    "join window_start with window_start and window_end with window_end"))
                continue
            bounds[role_names[0]] = (pair.left.name, pair.right.name)
            windows[role_names[0]] = (roles[0][1], roles[1][1])
        if self.problems:
            return None, None
        missing = [b for b in BOUNDS if b not in bounds]
        if missing:
            self.problems.append(self._problem(
                f"the join of `{left.alias}` and `{right.alias}` has no equality on "
                f"{' and '.join(missing)}: weir runs window joins only", self.select.args.get("joins", [None])[0]
                if self.select.args.get("joins") else self.select, REGULAR_JOIN_HINT))
            return None, None
        left_window, right_window = windows["window_start"]
        if not same_window(left_window, right_window):
            self.problems.append(self._problem(
                f"the inputs of a window join use different windows: `{left.alias}` {left_window.describe()}, "
                f"`{right.alias}` {right_window.describe()}", self.select,
                "window both inputs with the same window function, size and offset"))
            return None, None
        return bounds, keys

    # -- keys before the exchange ------------------------------------------------
    def key_columns(self, pairs: list[_Pair], left: Relation, right: Relation) -> tuple[list[str], list[str]]:
        """Key columns of each side, computing expressions and casts in a calc before the exchange."""
        computed: list[list[list[str]]] = [[], []]
        names: list[list[str]] = [[], []]
        for i, pair in enumerate(pairs):
            types = [self._type_of(e, r) for e, r in ((pair.left, left), (pair.right, right))]
            cast = _common_type(*types)
            if cast is False:
                self.problems.append(self._problem(
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


def _common_type(left: pa.DataType, right: pa.DataType) -> str | None | bool:
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


def plan_window_join(qp: "QueryPlanner", select: exp.Select, pipeline: str) -> Stream:
    """Plan a SELECT whose FROM joins two windowed inputs, or whose WHERE has an IN / EXISTS subquery."""
    from weir.planner.queries import PlanError

    planner = _WindowJoinPlanner(qp, select, pipeline)
    for unsupported, what in (("with", "WITH"), ("order", "ORDER BY"), ("limit", "LIMIT"), ("distinct", "DISTINCT")):
        if select.args.get(unsupported):
            raise qp.fail(f"{what} over a join is not supported yet", select.args[unsupported],
                          "join in a subquery and aggregate in the query around it")
    joins = select.args.get("joins") or []
    where = select.args.get("where")
    remaining = conjuncts(where.this) if where is not None else []
    from_ = select.args.get("from_")
    if len(joins) > 1:
        raise qp.fail("a SELECT may join two inputs; join a third in a query around it", joins[1])
    if joins:
        join_type, right_node, condition = _join_clause(qp, joins[0])
        left = planner.plan_side(from_.this)
        right = planner.plan_side(right_node)
        scope = JoinScope([left, right], qp.fallback)
        if condition is None:  # FROM a, b WHERE ...: the WHERE terms reading both inputs join them
            condition, remaining = _comma_condition(remaining, scope)
        pairs = planner.pairs_from_condition(condition, scope)
        null_aware = False
    else:
        predicates = [(c, _subquery_predicate(c)) for c in remaining]
        chosen = [(c, p) for c, p in predicates if p]
        if len(chosen) > 1:
            raise qp.fail("one IN or EXISTS subquery per SELECT is supported", chosen[1][0])
        term, (join_type, predicate) = chosen[0]
        remaining = [c for c in remaining if c is not term]
        left = planner.plan_side(from_.this)
        if isinstance(predicate, exp.Exists):
            right, pairs = _exists_side(planner, left, predicate)
            null_aware = False
        else:
            right, pairs = _in_side(planner, left, predicate)
            null_aware = join_type == "anti"
    if planner.problems:
        raise PlanError(planner.problems)
    if not planner.windowed(pairs, left, right):
        from weir.planner.stream_joins import plan_regular_join

        return plan_regular_join(planner, join_type, left, right, pairs, remaining, null_aware)
    for relation in (left, right):
        require_append_only(qp, relation.stream, "a window join", select)
    for unsupported, what in (("group", "GROUP BY"), ("having", "HAVING")):
        if select.args.get(unsupported):
            raise qp.fail(f"{what} over a window join is not supported yet", select.args[unsupported],
                          "join in a subquery and aggregate in the query around it")
    if join_type == "inner":  # the other ON terms filter the joined rows, as in Flink
        remaining = [*(term for term, _ in planner.residual), *remaining]
    else:
        planner.problems.extend(problem for _, problem in planner.residual if problem is not None)
    if planner.problems:
        raise PlanError(planner.problems)
    bounds, key_pairs = planner.split_pairs(pairs, left, right)
    if planner.problems:
        raise PlanError(planner.problems)
    left_keys, right_keys = planner.key_columns(key_pairs, left, right)
    if planner.problems:
        raise PlanError(planner.problems)

    right.output_names = output_names(left.stream.schema.names, right.stream.schema.names)
    relations = [left] if join_type in ("semi", "anti") else [left, right]
    scope = JoinScope(relations, qp.fallback)
    window = window_bound(qp.builder, left.stream.node_id, bounds["window_start"][0])[1].describe()
    config = {
        "join_type": join_type,
        "null_aware": null_aware,
        "left": {"columns": left.stream.schema.names, "keys": left_keys,
                 "window_start": bounds["window_start"][0], "window_end": bounds["window_end"][0]},
        "right": {"columns": right.stream.schema.names, "keys": right_keys,
                  "window_start": bounds["window_start"][1], "window_end": bounds["window_end"][1]},
    }
    description = (
        f"WindowJoin(joinType=[{DESCRIBED_TYPES[join_type]}{', null-aware' if null_aware else ''}], "
        f"window=[{window}], leftKeys=[{', '.join(left_keys)}], rightKeys=[{', '.join(right_keys)}])"
    )
    edges = [Edge(r.stream.node_id, "hash", tuple(k)) if k else Edge(r.stream.node_id)
             for r, k in ((left, left_keys), (right, right_keys))]
    node = qp.builder.add(pipeline, "window_join", config, scope.schema, edges, description)
    joined = Stream(node.id, scope.schema, frozenset(), f"{left.alias} JOIN {right.alias}")
    return project_joined(qp, select, joined, scope, remaining, pipeline)


def project_joined(qp: "QueryPlanner", select: exp.Select, joined: Stream, scope: JoinScope, remaining: list[exp.Expression],
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
        from weir.planner.group_aggregate import plan_group_aggregate  # GROUP BY over the join: updating

        return plan_group_aggregate(qp, outer, joined, scope, pipeline)
    return qp._plan_calc(outer, joined, scope, pipeline)



def _join_clause(qp: "QueryPlanner", join: exp.Join) -> tuple[str, exp.Expression, exp.Expression]:
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


def _comma_condition(terms: list[exp.Expression], scope: JoinScope) -> tuple[exp.Expression, list[exp.Expression]]:
    """For ``FROM a, b WHERE ...``: the WHERE terms that read both inputs (the join condition),
    and the others (a filter of the joined rows)."""
    joining, rest = [], []
    for term in terms:
        read = {located[0] for column in term.find_all(exp.Column)
                if (located := scope.locate(column, [])) is not None}
        (joining if len(read) == 2 else rest).append(term)
    return (exp.and_(*joining) if joining else exp.true()), rest


def _in_side(planner: _WindowJoinPlanner, left: Relation, predicate: exp.In) -> tuple[Relation, list[_Pair]]:
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
        bound = planner._side_of(item, scope)
        if bound is not None:
            pairs.append(_Pair(bound[1], exp.column(name, quoted=True), item))
    return right, pairs


def _exists_side(planner: _WindowJoinPlanner, left: Relation,
                 predicate: exp.Exists) -> tuple[Relation, list[_Pair]]:
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

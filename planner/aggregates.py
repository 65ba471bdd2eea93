"""Planning GROUP BY over a window table function into a window_aggregate operator.

Group keys, aggregate calls and the final projection are separated: the
operator evaluates keys and aggregate arguments over input rows, and the
projection and HAVING over (keys, window bounds, aggregate results).
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.engine.operators.calc import CalcConfig, Expand
from weir.engine.operators.window_aggregate import GroupingSetCopies, WindowAggregateConfig
from weir.engine.operators.windows import SlicedWindowConfig
from weir.engine.sql_eval import INPUT
from weir.planner.aggregate_calls import AggregateCalls
from weir.planner.errors import PlanError, column_position
from weir.planner.expressions import Scope, bind, is_aggregate, output_name, quote, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.grouping_sets import (CONSTRUCTS, MAX_SETS, SET_ID, construct_sets, describe_sets, grouping_value,
                                   multiply)
from weir.planner.planning import QueryPlanning
from weir.planner.windows import WINDOW_COLUMNS, WindowSpec
from weir.sql.errors import Problem

#: The session window operator, imported once a query has one (``engine.lazy_registry``).
session_window = LazyModule("weir.engine.operators.session_window")


Key = tuple[str, exp.Expression]


def plan_window_aggregate(qp: QueryPlanning, select: exp.Select, stream: Stream, window: WindowSpec,
                          scope: Scope, pipeline: str, operator: tuple[str, str] = ("window_aggregate", "WindowAggregate")
                          ) -> Stream:
    """1. the group keys and grouping sets; 2. the SELECT list and HAVING over keys, window bounds
    and aggregate calls; 3. WHERE, computed keys or the Expand before the exchange; 4. the operator:
    ``operator`` is its kind and its EXPLAIN name (a session window's: ``planner.sessions``)."""
    problems: list[Problem] = []
    input_scope = Scope(stream.schema, stream.name, qp.fallback)
    group = select.args.get("group")
    keys, sets = _group_keys(qp, select, scope, problems)
    aggregates = AggregateCalls(qp, input_scope, problems)
    grouped_by = GroupedExpressions(keys, sets, aggregates, scope, problems, qp.fallback, select)
    items = qp.expand_star(select.expressions, scope)
    final_items = [(output_name(item, index), grouped_by.final(item.unalias() if isinstance(item, exp.Alias) else item))
                   for index, item in enumerate(items)]
    having = select.args.get("having")
    having_final = grouped_by.final(having.this) if having is not None else None
    where = select.args.get("where")
    filter_sql = to_duckdb(bind(where.this, input_scope, problems), input_scope.schema) if where is not None else None
    aggregates.check_merges("a window aggregate")
    if problems:
        raise PlanError(problems)

    if sets:
        stream = _plan_expand(qp, stream, keys, sets, filter_sql, input_scope, pipeline, group)
        hashed = [*(f"_key{i}" for i in range(len(keys))), SET_ID]  # the Expand's columns
        key_sql = [[name, quote(column)] for name, column in zip([*(n for n, _ in keys), SET_ID], hashed)]
    else:
        computed = [[name, to_duckdb(key, input_scope.schema)] for name, key in keys
                    if not isinstance(key, exp.Column)]
        if filter_sql or computed:
            stream = qp.plan_pre_aggregate(stream, filter_sql, computed, pipeline, where or group)
        key_sql = [[name, quote(name)] for name, _ in keys]
        hashed = [name for name, _ in keys]
    grouped = _grouped_schema(qp, key_sql, aggregates, stream, select)
    projection = [[name, to_duckdb(expression, grouped)] for name, expression in final_items]
    having_sql = to_duckdb(having_final, grouped) if having_final is not None else None
    schema = _output_schema(qp, grouped, projection, having_sql, select)
    edge = Edge(stream.node_id, "hash", tuple(hashed)) if key_sql else Edge(stream.node_id)
    node = _add_window_aggregate(qp, window, key_sql, aggregates, having_sql, projection, sets, schema, edge,
                                 pipeline, operator)
    qp.builder.aggregate_scopes[node.id] = grouped
    times = frozenset(n for n, s in projection if s == quote("window_time"))
    # its own window's bounds, as the SELECT list names them (the keys and aggregates are new columns)
    bounds = {name: (e.name, window) for name, e in final_items if isinstance(e, exp.Column) and e.name in WINDOW_COLUMNS}
    return Stream(node.id, schema, times, stream.name, window_columns=bounds)


def _group_keys(qp: QueryPlanning, select: exp.Select, scope: Scope,
                problems: list[Problem]) -> tuple[list[Key], list[tuple[int, ...]] | None]:
    """The GROUP BY keys other than the window bounds (a column keeps its name, an expression is
    ``_key<i>``), and the grouping sets as key indices (None without GROUPING SETS, ROLLUP or CUBE)."""
    keys: list[Key] = []
    grouped_windows: set[str] = set()
    group = select.args.get("group")
    common: list[int] = []
    constructs: list[list[tuple[int, ...]]] = []
    for item in group.expressions if group else []:
        if isinstance(item, CONSTRUCTS):
            constructs.append([tuple(i for i in (_key_index(e, True, keys, grouped_windows, scope, problems,
                                                             qp.fallback) for e in members) if i is not None)
                               for members in construct_sets(item)])
        else:
            index = _key_index(item, False, keys, grouped_windows, scope, problems, qp.fallback)
            if index is not None:
                common.append(index)
    if problems:
        raise PlanError(problems)
    sets = None
    if constructs:
        sets = [tuple(dict.fromkeys(common))]
        for more in constructs:
            sets = multiply(sets, more)
            if len(sets) > MAX_SETS:
                raise qp.fail(f"GROUP BY has more than {MAX_SETS} grouping sets", group,
                              "group by fewer sets: each set is one more copy of every row")
    if not {"window_start", "window_end"} <= grouped_windows:
        raise qp.fail(
            "a window aggregate must GROUP BY window_start and window_end", group or select,
            "add window_start, window_end to the GROUP BY clause",
        )
    for name, key in keys:
        if any(c.name in WINDOW_COLUMNS for c in key.find_all(exp.Column)):
            raise qp.fail(f"group key {key.sql()} uses a window column; only window_start, "
                          "window_end may be grouped", key)
    return keys, sets


def _key_index(item: exp.Expression, in_construct: bool, keys: list[Key], grouped_windows: set[str],
               scope: Scope, problems: list[Problem], fallback: tuple[int, int]) -> int | None:
    """The index of the GROUP BY item in ``keys`` (added when new), or None for a window bound."""
    bound = bind(item, scope, problems)
    if isinstance(bound, exp.Column) and bound.name in WINDOW_COLUMNS:
        if in_construct:
            problems.append(Problem(
                f"{bound.name} inside GROUPING SETS, ROLLUP or CUBE", *column_position(item, bound.name, fallback),
                "group by window_start, window_end outside the sets: GROUP BY window_start, window_end, "
                "GROUPING SETS (...)"))
        grouped_windows.add(bound.name)
        return None
    for index, (_, key) in enumerate(keys):
        if key == bound:
            return index
    keys.append((bound.name if isinstance(bound, exp.Column) else f"_key{len(keys)}", bound))
    return len(keys) - 1


@dataclass
class GroupedExpressions:
    """The SELECT list and HAVING of a window aggregate as expressions over its keys (by name),
    window bounds, grouping set id and aggregate calls (``_agg<i>``)."""

    keys: list[Key]
    sets: list[tuple[int, ...]] | None
    aggregates: AggregateCalls
    scope: Scope
    problems: list[Problem]
    fallback: tuple[int, int]
    select: exp.Select

    def final(self, expression: exp.Expression) -> exp.Expression:
        allowed = {name for name, _ in self.keys} | set(WINDOW_COLUMNS) | ({SET_ID} if self.sets else set())
        rewritten = bind(expression, self.scope, self.problems).transform(self._rewrite)
        for column in rewritten.find_all(exp.Column):
            if column.name not in allowed and not column.name.startswith("_agg"):
                self.problems.append(Problem(
                    f"column `{column.name}` is neither grouped nor aggregated",
                    *column_position(expression, column.name, self.fallback),
                    f"add `{column.name}` to GROUP BY or wrap it in an aggregate such as MAX({column.name})",
                ))
        return rewritten

    def _rewrite(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.Grouping, exp.GroupingId)):
            return self._grouping(node)
        if is_aggregate(node):
            return exp.column(self.aggregates.name_for(node), quoted=True)
        for name, key in self.keys:
            if node == key:
                return exp.column(name, quoted=True)
        return node

    def _grouping(self, node: exp.Expression) -> exp.Expression:
        """GROUPING(k) / GROUPING_ID(k, ...): which of its keys the row's grouping set leaves out."""
        indices: list[int | None] = []
        for argument in node.expressions or [node.this]:
            text = argument.name if isinstance(argument, exp.Column) else argument.sql()  # bound: quoted
            bound = bind(argument, self.scope, self.problems)
            if isinstance(bound, exp.Column) and bound.name in WINDOW_COLUMNS:
                indices.append(None)
                continue
            found = [i for i, (_, key) in enumerate(self.keys) if key == bound]
            if not found:
                self.problems.append(Problem(f"{node.sql_name()} of `{text}`, which is not a GROUP BY key",
                                             *column_position(self.select, text, self.fallback),
                                             "GROUPING and GROUPING_ID take GROUP BY keys"))
            indices.append(found[0] if found else None)
        return grouping_value(self.sets or [tuple(range(len(self.keys)))], indices)


def _add_window_aggregate(qp: QueryPlanning, window: WindowSpec, key_sql: list[list[str]],
                          aggregates: AggregateCalls, having_sql: str | None, projection: list[list[str]],
                          sets: list[tuple[int, ...]] | None, schema: pa.Schema, edge: Edge, pipeline: str,
                          operator: tuple[str, str]):
    kind, title = operator
    parts = dict(keys=key_sql, aggregates=aggregates.calls, having=having_sql, projection=projection)
    if window.kind == "session":  # added as a session_window (planner.sessions)
        config = session_window.SessionWindowConfig(window=session_window.SessionWindowSpec(**window.config()),
                                                    **parts)
    else:
        config = WindowAggregateConfig(window=SlicedWindowConfig(**window.config()), **parts,
                                       grouping_sets=GroupingSetCopies(column=SET_ID, count=len(sets)) if sets else None)
    aggregate_list = ", ".join(f"{c.name}={sql}" for c, sql in zip(aggregates.calls, aggregates.sql))
    select_list = ", ".join(name if sql == quote(name) else f"{name}={sql}" for name, sql in projection)
    description = (
        f"{title}(window=[{window.describe()}], groupBy=[{', '.join(n for n, _ in key_sql)}], "
        f"aggregates=[{aggregate_list}], select=[{select_list}]"
        + (f", having=[{having_sql}]" if having_sql else "") + ")"
    )
    return qp.builder.add(pipeline, kind, config, schema, [edge], description)


def _plan_expand(qp, stream: Stream, keys, sets, filter_sql, input_scope: Scope, pipeline: str,
                 node: exp.Expression) -> Stream:
    """The Expand before the exchange: every row once per grouping set (``_e``), each key as
    ``_key<i>``, NULL in the sets without it; the input columns pass unchanged (aggregates read them)."""
    projection = [[name, quote(name)] for name in stream.schema.names]
    for index, (_, key) in enumerate(keys):
        value = to_duckdb(key, input_scope.schema)
        holding = [str(n) for n, members in enumerate(sets) if index in members]
        if len(holding) < len(sets):  # every key is in some set: it came from one
            value = f"CASE WHEN {quote(SET_ID)} IN ({', '.join(holding)}) THEN {value} END"
        projection.append([f"_key{index}", value])
    projection.append([SET_ID, quote(SET_ID)])
    scope_schema = pa.schema([*stream.schema, pa.field(SET_ID, pa.int64())])
    schema = qp.describe_projection(projection, filter_sql, scope_schema, node)
    config = CalcConfig(projection=projection, filter=filter_sql, expand=Expand(column=SET_ID, count=len(sets)))
    names = [name for name, _ in keys]
    description = f"Expand(groupingSets=[{describe_sets(sets, names)}], " + ", ".join(
        [f"{SET_ID}=0..{len(sets) - 1}"] + [f"_key{i}={to_duckdb(k, input_scope.schema)}" for i, (_, k) in enumerate(keys)]
        + ([f"where=[{filter_sql}]"] if filter_sql else [])) + ")"
    added = qp.builder.add(pipeline, "calc", config, schema, [Edge(stream.node_id)], description, label="expand")
    return Stream(added.id, schema, stream.time_attributes, stream.name)


def _grouped_schema(qp, key_sql, aggregates: AggregateCalls, stream: Stream, select) -> pa.Schema:
    """The schema the projection and HAVING see: keys, window bounds, aggregate results."""
    inner = [f"{sql} AS {quote(name)}" for name, sql in key_sql]
    inner += [f"CAST(NULL AS TIMESTAMP) AS {name}" for name in WINDOW_COLUMNS]
    inner += [f"{sql} AS {quote(call.name)}" for sql, call in zip(aggregates.typed_sql(), aggregates.calls)]
    group_by = f" GROUP BY {', '.join(sql for _, sql in key_sql)}" if key_sql else ""
    return qp.describe(f"SELECT {', '.join(inner)} FROM {INPUT}{group_by}", stream.schema, select)


def _output_schema(qp, grouped: pa.Schema, projection, having_sql, select) -> pa.Schema:
    outer = ", ".join(f"{sql} AS {quote(name)}" for name, sql in projection)
    where = f" WHERE {having_sql}" if having_sql else ""
    return qp.describe(f"SELECT {outer} FROM {INPUT}{where}", grouped, select)

"""Planning GROUP BY over a window table function into a window_aggregate operator.

Group keys, aggregate calls and the final projection are separated: the
operator evaluates keys and aggregate arguments over input rows, and the
projection and HAVING over (keys, window bounds, aggregate results).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from weir.engine.graph import Edge
from weir.engine.operators.accumulators import FUNCTIONS
from weir.engine.sql_eval import INPUT
from weir.planner.expressions import AGGREGATES, Scope, bind, is_aggregate, output_name, quote, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.grouping_sets import (CONSTRUCTS, MAX_SETS, SET_ID, construct_sets, describe_sets, grouping_value,
                                   multiply)
from weir.planner.windows import WINDOW_COLUMNS, WindowSpec
from weir.sql.dialect import Weir
from weir.sql.errors import Problem

if TYPE_CHECKING:
    from weir.planner.queries import QueryPlanner


class _Aggregates:
    """The distinct aggregate calls of a query, named _agg0, _agg1, ..."""

    def __init__(self, qp: "QueryPlanner", input_scope: Scope, problems: list[Problem]):
        self.qp, self.scope, self.problems = qp, input_scope, problems
        self.calls: list[dict] = []
        self.sql: list[str] = []  # the call as DuckDB SQL, for describe and EXPLAIN
        self._by_sql: dict[str, str] = {}

    def name_for(self, node: exp.Expression) -> str:
        call = node.this if isinstance(node, exp.Filter) else node
        condition = node.expression.this if isinstance(node, exp.Filter) else None
        function = AGGREGATES.get(type(call))
        if function is None:
            raise self.qp.fail(f"aggregate function {call.sql_name()} is not supported yet", call,
                               "supported: COUNT, SUM, MIN, MAX, AVG, with DISTINCT and FILTER (WHERE ...)")
        argument, distinct = call.this, False
        if isinstance(argument, exp.Distinct):
            distinct, argument = True, argument.expressions[0]
        if isinstance(argument, exp.Star):
            argument = None
        schema = self.scope.schema
        arg_sql = to_duckdb(bind(argument, self.scope, self.problems), schema) if argument is not None else None
        filter_sql = to_duckdb(bind(condition, self.scope, self.problems), schema) if condition is not None else None
        text = f"{function}({'DISTINCT ' if distinct else ''}{arg_sql or '*'})"
        if filter_sql:
            text += f" FILTER (WHERE {filter_sql})"
        if text not in self._by_sql:
            name = f"_agg{len(self.calls)}"
            self._by_sql[text] = name
            call = {"name": name, "function": function, "argument": arg_sql,
                    "distinct": distinct, "filter": filter_sql}
            kind = self._result_type(function, arg_sql, node) if arg_sql is not None else None
            if kind is not None:
                call.update(result_type=kind, label=node.sql(dialect=Weir))
            self.calls.append(call)
            self.sql.append(text)
        return self._by_sql[text]

    def _result_type(self, function: str, arg_sql: str, node: exp.Expression) -> str | None:
        """Flink's result type of SUM and AVG as DuckDB type SQL (``AggregateFunction.result_type``)."""
        if function not in ("sum", "avg"):
            return None
        kind = self.qp.describe(f"SELECT {arg_sql} AS a FROM {INPUT}", self.scope.schema, node).field(0).type
        return FUNCTIONS[function].result_type(kind)


def plan_window_aggregate(qp: "QueryPlanner", select: exp.Select, stream: Stream, window: WindowSpec,
                          scope: Scope, pipeline: str) -> Stream:
    problems: list[Problem] = []
    input_scope = Scope(stream.schema, stream.name, qp.fallback)

    keys: list[tuple[str, exp.Expression]] = []
    grouped_windows: set[str] = set()
    #: Grouping sets as key indices; None without GROUPING SETS, ROLLUP or CUBE.
    sets: list[tuple[int, ...]] | None = None
    group = select.args.get("group")

    def key_index(item: exp.Expression, in_construct: bool) -> int | None:
        bound = bind(item, scope, problems)
        if isinstance(bound, exp.Column) and bound.name in WINDOW_COLUMNS:
            if in_construct:
                problems.append(Problem(
                    f"{bound.name} inside GROUPING SETS, ROLLUP or CUBE", *_pos(item, bound.name, qp.fallback),
                    "group by window_start, window_end outside the sets: GROUP BY window_start, window_end, "
                    "GROUPING SETS (...)"))
            grouped_windows.add(bound.name)
            return None
        for index, (_, key) in enumerate(keys):
            if key == bound:
                return index
        keys.append((bound.name if isinstance(bound, exp.Column) else f"_key{len(keys)}", bound))
        return len(keys) - 1

    common: list[int] = []
    constructs: list[list[tuple[int, ...]]] = []
    for item in group.expressions if group else []:
        if isinstance(item, CONSTRUCTS):
            constructs.append([tuple(i for i in (key_index(e, True) for e in members) if i is not None)
                               for members in construct_sets(item)])
        else:
            index = key_index(item, False)
            if index is not None:
                common.append(index)
    if problems:
        raise _error(problems)
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

    aggregates = _Aggregates(qp, input_scope, problems)
    allowed = {name for name, _ in keys} | set(WINDOW_COLUMNS) | ({SET_ID} if sets else set())

    def grouping(node: exp.Expression) -> exp.Expression:
        """GROUPING(k) / GROUPING_ID(k, ...): which of its keys the row's grouping set leaves out."""
        arguments = node.expressions or [node.this]
        indices: list[int | None] = []
        for argument in arguments:
            text = argument.name if isinstance(argument, exp.Column) else argument.sql()  # bound: quoted
            bound = bind(argument, scope, problems)
            if isinstance(bound, exp.Column) and bound.name in WINDOW_COLUMNS:
                indices.append(None)
                continue
            found = [i for i, (_, key) in enumerate(keys) if key == bound]
            if not found:
                problems.append(Problem(f"{node.sql_name()} of `{text}`, which is not a GROUP BY key",
                                        *_pos(select, text, qp.fallback),
                                        "GROUPING and GROUPING_ID take GROUP BY keys"))
            indices.append(found[0] if found else None)
        return grouping_value(sets or [tuple(range(len(keys)))], indices)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.Grouping, exp.GroupingId)):
            return grouping(node)
        if is_aggregate(node):
            return exp.column(aggregates.name_for(node), quoted=True)
        for name, key in keys:
            if node == key:
                return exp.column(name, quoted=True)
        return node

    def final(expression: exp.Expression) -> exp.Expression:
        bound = bind(expression, scope, problems)
        rewritten = bound.transform(rewrite)
        for column in rewritten.find_all(exp.Column):
            if column.name not in allowed and not column.name.startswith("_agg"):
                problems.append(Problem(
                    f"column `{column.name}` is neither grouped nor aggregated",
                    *_pos(expression, column.name, qp.fallback),
                    f"add `{column.name}` to GROUP BY or wrap it in an aggregate such as MAX({column.name})",
                ))
        return rewritten

    final_items = []
    items = qp.expand_star(select.expressions, scope)
    for index, item in enumerate(items):
        final_items.append((output_name(item, index), final(item.unalias() if isinstance(item, exp.Alias) else item)))
    having = select.args.get("having")
    having_final = final(having.this) if having is not None else None
    where = select.args.get("where")
    filter_sql = to_duckdb(bind(where.this, input_scope, problems), input_scope.schema) if where is not None else None
    if problems:
        raise _error(problems)

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
    config = {
        "window": window.config(),
        "keys": key_sql,
        "aggregates": aggregates.calls,
        "having": having_sql,
        "projection": projection,
    }
    if sets:
        config["grouping_sets"] = {"column": SET_ID, "count": len(sets)}
    aggregate_list = ", ".join(f"{c['name']}={sql}" for c, sql in zip(aggregates.calls, aggregates.sql))
    select_list = ", ".join(name if sql == quote(name) else f"{name}={sql}" for name, sql in projection)
    description = (
        f"WindowAggregate(window=[{window.describe()}], groupBy=[{', '.join(n for n, _ in key_sql)}], "
        f"aggregates=[{aggregate_list}], select=[{select_list}]"
        + (f", having=[{having_sql}]" if having_sql else "") + ")"
    )
    edge = Edge(stream.node_id, "hash", tuple(hashed)) if key_sql else Edge(stream.node_id)
    node = qp.builder.add(pipeline, "window_aggregate", config, schema, [edge], description)
    times = frozenset(n for n, s in projection if s == quote("window_time"))
    return Stream(node.id, schema, times, stream.name)


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
    config = {"projection": projection, "filter": filter_sql, "expand": {"column": SET_ID, "count": len(sets)}}
    names = [name for name, _ in keys]
    description = f"Expand(groupingSets=[{describe_sets(sets, names)}], " + ", ".join(
        [f"{SET_ID}=0..{len(sets) - 1}"] + [f"_key{i}={to_duckdb(k, input_scope.schema)}" for i, (_, k) in enumerate(keys)]
        + ([f"where=[{filter_sql}]"] if filter_sql else [])) + ")"
    added = qp.builder.add(pipeline, "calc", config, schema, [Edge(stream.node_id)], description, label="expand")
    return Stream(added.id, schema, stream.time_attributes, stream.name)


def _grouped_schema(qp, key_sql, aggregates: _Aggregates, stream: Stream, select) -> pa.Schema:
    """The schema the projection and HAVING see: keys, window bounds, aggregate results."""
    inner = [f"{sql} AS {quote(name)}" for name, sql in key_sql]
    inner += [f"CAST(NULL AS TIMESTAMP) AS {name}" for name in WINDOW_COLUMNS]
    inner += [f"{typed(sql, call)} AS {quote(call['name'])}" for sql, call in zip(aggregates.sql, aggregates.calls)]
    group_by = f" GROUP BY {', '.join(sql for _, sql in key_sql)}" if key_sql else ""
    return qp.describe(f"SELECT {', '.join(inner)} FROM {INPUT}{group_by}", stream.schema, select)


def typed(sql: str, call: dict) -> str:
    """An aggregate call's SQL in its result type, for the schema its results have."""
    return f"CAST({sql} AS {call['result_type']})" if call.get("result_type") else sql


def _output_schema(qp, grouped: pa.Schema, projection, having_sql, select) -> pa.Schema:
    outer = ", ".join(f"{sql} AS {quote(name)}" for name, sql in projection)
    where = f" WHERE {having_sql}" if having_sql else ""
    return qp.describe(f"SELECT {outer} FROM {INPUT}{where}", grouped, select)


def _pos(expression: exp.Expression, name: str, fallback):
    from weir.planner.expressions import position

    for column in expression.find_all(exp.Column):
        if column.name.lower() == name.lower():
            return position(column, fallback)
    return position(expression, fallback)


def _error(problems: list[Problem]):
    from weir.planner.queries import PlanError

    return PlanError(problems)

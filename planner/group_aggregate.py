"""Planning GROUP BY without a window into a group_aggregate operator: an updating stream.

Like a window aggregate, keys, aggregate calls and the final projection are
separated (group keys that are expressions and WHERE are computed by a calc
before the exchange); unlike it, the result is a changelog: its schema ends
with ``_row_kind`` and its upsert key is the group keys, where the projection
keeps them all as plain columns. Without GROUP BY (``SELECT COUNT(*) FROM t``)
there is one group.
"""
from __future__ import annotations


import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND, ROW_KIND_TYPE
from weir.engine.graph import Edge
from weir.engine.operators.group_aggregate import GroupAggregateConfig
from weir.engine.sql_eval import INPUT
from weir.planner.aggregate_calls import AggregateCalls
from weir.planner.calc import projected_key
from weir.planner.errors import PlanError, column_position
from weir.planner.expressions import Scope, bind, contains_aggregate, is_aggregate, output_name, quote, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.sql.errors import Problem


def plan_group_aggregate(qp: QueryPlanning, select: exp.Select, stream: Stream, scope: Scope,
                         pipeline: str) -> Stream:
    problems: list[Problem] = []
    keys: list[tuple[str, exp.Expression]] = []
    group = select.args.get("group")
    for item in group.expressions if group else []:
        bound = bind(item, scope, problems)
        if isinstance(bound, exp.Column):
            keys.append((bound.name, bound))
        else:
            keys.append((f"_key{len(keys)}", bound))
    if problems:
        raise PlanError(problems)

    aggregates = AggregateCalls(qp, scope, problems)
    allowed = {name for name, _ in keys}

    def rewrite(node: exp.Expression) -> exp.Expression:
        if is_aggregate(node):
            return exp.column(aggregates.name_for(node), quoted=True)
        for name, key in keys:
            if node == key:
                return exp.column(name, quoted=True)
        return node

    def final(expression: exp.Expression) -> exp.Expression:
        rewritten = bind(expression, scope, problems).transform(rewrite)
        for column in rewritten.find_all(exp.Column):
            if column.name not in allowed and not column.name.startswith("_agg"):
                problems.append(Problem(
                    f"column `{column.name}` is neither grouped nor aggregated",
                    *column_position(expression, column.name, qp.fallback),
                    f"add `{column.name}` to GROUP BY or wrap it in an aggregate such as MAX({column.name})",
                ))
        return rewritten

    final_items = [(output_name(item, index), final(item.unalias() if isinstance(item, exp.Alias) else item))
                   for index, item in enumerate(qp.expand_star(select.expressions, scope))]
    having = select.args.get("having")
    having_final = final(having.this) if having is not None else None
    where = select.args.get("where")
    filter_sql = to_duckdb(bind(where.this, scope, problems), scope.schema) if where is not None else None
    aggregates.check_retracts(stream.append_only)  # a Python aggregate function over an updating input
    if problems:
        raise PlanError(problems)

    computed = [[name, to_duckdb(key, scope.schema)] for name, key in keys if not isinstance(key, exp.Column)]
    if filter_sql or computed:
        stream = qp.plan_pre_aggregate(stream, filter_sql, computed, pipeline, where or group)
    key_sql = [[name, quote(name)] for name, _ in keys]
    grouped = _grouped_schema(qp, key_sql, aggregates, stream, select)
    projection = [[name, to_duckdb(expression, grouped)] for name, expression in final_items]
    having_sql = to_duckdb(having_final, grouped) if having_final is not None else None
    outer = ", ".join(f"{sql} AS {quote(name)}" for name, sql in projection)
    schema = qp.describe(f"SELECT {outer} FROM {INPUT}", grouped, select)
    schema = schema.append(pa.field(ROW_KIND, ROW_KIND_TYPE))
    config = GroupAggregateConfig(keys=key_sql, aggregates=aggregates.calls, having=having_sql, projection=projection,
                                  append_only_input=stream.append_only)
    aggregate_list = ", ".join(f"{c.name}={sql}" for c, sql in zip(aggregates.calls, aggregates.sql))
    select_list = ", ".join(name if sql == quote(name) else f"{name}={sql}" for name, sql in projection)
    description = (f"GroupAggregate(groupBy=[{', '.join(n for n, _ in key_sql)}], aggregates=[{aggregate_list}], "
                   f"select=[{select_list}]" + (f", having=[{having_sql}]" if having_sql else "") + ")")
    edge = Edge(stream.node_id, "hash", tuple(n for n, _ in key_sql)) if key_sql else Edge(stream.node_id)
    node = qp.builder.add(pipeline, "group_aggregate", config, schema, [edge], description)
    qp.builder.aggregate_scopes[node.id] = grouped
    return Stream(node.id, schema, frozenset(), stream.name, append_only=False,
                  upsert_key=projected_key(tuple(n for n, _ in key_sql), projection))


def distinct_as_group_by(qp: QueryPlanning, select: exp.Select, scope: Scope) -> exp.Select:
    """``SELECT DISTINCT a, b FROM t`` as ``SELECT a, b FROM t GROUP BY a, b``, as Flink plans it."""
    distinct = select.args["distinct"]
    if distinct.args.get("on") is not None:
        raise qp.fail("SELECT DISTINCT ON is not supported", distinct,
                      "keep one row per key with ROW_NUMBER() OVER (PARTITION BY ...) = 1 over a window")
    if select.args.get("group") is not None or any(contains_aggregate(e) for e in select.expressions):
        raise qp.fail("SELECT DISTINCT with GROUP BY or aggregates is not supported", distinct,
                      "the groups are distinct already: drop DISTINCT")
    items = qp.expand_star(select.expressions, scope)
    rewritten = select.copy()
    rewritten.set("distinct", None)
    rewritten.set("expressions", [item.copy() for item in items])
    rewritten.set("group", exp.Group(expressions=[
        (item.unalias() if isinstance(item, exp.Alias) else item).copy() for item in items]))
    return rewritten


def _grouped_schema(qp, key_sql, aggregates: AggregateCalls, stream: Stream, select) -> pa.Schema:
    """The schema the projection and HAVING see: keys and aggregate results."""
    inner = [f"{sql} AS {quote(name)}" for name, sql in key_sql]
    inner += [f"{sql} AS {quote(call.name)}" for sql, call in zip(aggregates.typed_sql(), aggregates.calls)]
    group_by = f" GROUP BY {', '.join(sql for _, sql in key_sql)}" if key_sql else ""
    return qp.describe(f"SELECT {', '.join(inner) or '1'} FROM {INPUT}{group_by}", stream.schema, select)

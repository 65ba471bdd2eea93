"""Planning UNION ALL: several inputs merged into one stream.

``q1 UNION ALL q2 [UNION ALL q3 ...]`` (nested unions are flattened) becomes
one ``union`` node with an input per query. Columns match by position and
take the first query's names. Types widen as in Flink: integers, decimals and
floating types to the widest of them (DuckDB's rule for UNION), strings to
VARCHAR, NULL to the other side's type; other pairs are refused naming the
column. An input whose types differ from the union's is cast by a ``calc``
before it. A column is a time attribute of the union when it is one in every
input (the union's watermark is the minimum of its inputs'). When an input is
updating, so is the union: its rows end with ``_row_kind``, which a calc adds
(+I) to every append-only input.

``UNION`` (distinct), ``INTERSECT`` and ``EXCEPT`` remove duplicates across the
whole unbounded stream: their result is updating, and they are refused with a
hint.
"""
from __future__ import annotations


import duckdb
import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import INSERT, ROW_KIND, ROW_KIND_TYPE
from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.engine.operators.calc import CalcConfig
from weir.engine.operators.duckdb_sql import duckdb_name
from weir.engine.sql_eval import INPUT, describe
from weir.planner.calc import calc_description
from weir.planner.errors import PlanError
from weir.planner.expressions import quote
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.planner.types import normalise, sql_name
from weir.planner.windows import same_window
from weir.sql.errors import Problem

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
union_operator = LazyModule("weir.engine.operators.union")

_NUMERIC = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)


def _branches(query: exp.Expression) -> list[exp.Expression]:
    """The queries of a chain of UNION ALLs, left to right."""
    while isinstance(query, exp.Subquery) and isinstance(query.this, exp.Union) and not query.args.get("alias"):
        query = query.this
    if isinstance(query, exp.Union) and type(query) is exp.Union and not query.args.get("distinct"):
        if not any(query.args.get(k) for k in ("order", "limit", "offset")):
            return _branches(query.this) + _branches(query.expression)
    return [query]


def common_type(left: pa.DataType, right: pa.DataType) -> pa.DataType | None:
    """The type both columns widen to, or None when Flink would refuse the pair."""
    if left == right or pa.types.is_null(right):
        return left
    if pa.types.is_null(left):
        return right
    if pa.types.is_timestamp(left) and pa.types.is_timestamp(right):
        return pa.timestamp("us")
    strings = (pa.types.is_string, pa.types.is_large_string)
    if any(s(left) for s in strings) and any(s(right) for s in strings):
        return pa.string()
    if any(t(left) for t in _NUMERIC) and any(t(right) for t in _NUMERIC):
        schema = pa.schema([pa.field("a", left), pa.field("b", right)])
        try:
            found = describe(f"SELECT a AS c FROM {INPUT} UNION ALL SELECT b FROM {INPUT}", schema)
        except duckdb.Error:
            return None
        return normalise(found.field(0).type)
    return None


def plan_union(qp: QueryPlanning, query: exp.Union, pipeline: str) -> Stream:
    kind = {exp.Intersect: "INTERSECT", exp.Except: "EXCEPT"}.get(type(query))
    if kind or query.args.get("distinct"):
        word = kind or "UNION"
        raise qp.fail(f"{word} over streams is not supported: removing duplicates across an unbounded "
                      "stream makes an updating result", query,
                      "use UNION ALL, which keeps every row (and stays append-only)" if word == "UNION"
                      else f"{word} needs state over the whole stream; filter with a window join instead")
    for clause in ("order", "limit", "offset"):
        if query.args.get(clause):
            raise qp.fail(f"{clause.upper()} over a UNION ALL in a streaming query is not supported",
                          query.args[clause], "leave it out: a stream has no end to sort or cut at")
    branches = _branches(query)
    planned = [qp.plan_query(b, pipeline) for b in branches]
    updating = not all(s.append_only for s in planned)
    # An updating union carries each row's kind: append-only inputs add +I, the columns compare without it.
    streams = [_columns_only(s) for s in planned]
    first = streams[0]
    problems: list[Problem] = []
    for branch, stream in zip(branches[1:], streams[1:]):
        if len(stream.schema) != len(first.schema):
            problems.append(qp.fail(
                f"the queries of a UNION ALL give different numbers of columns: {len(first.schema)} "
                f"({', '.join(first.schema.names)}) and {len(stream.schema)} ({', '.join(stream.schema.names)})",
                branch, "select the same number of columns in every query of the UNION ALL").problems[0])
    if problems:
        raise PlanError(problems)
    types = []
    for index, name in enumerate(first.schema.names):
        wanted = first.schema.field(index).type
        for branch, stream in zip(branches[1:], streams[1:]):
            other = stream.schema.field(index).type
            widened = common_type(wanted, other)
            if widened is None:
                problems.append(qp.fail(
                    f"column {index + 1} (`{name}`) of the UNION ALL is {sql_name(wanted)} in one query and "
                    f"{sql_name(other)} (`{stream.schema.names[index]}`) in another", _item(branch, index),
                    f"CAST one of them, e.g. CAST({stream.schema.names[index]} AS {sql_name(wanted)})").problems[0])
                break
            wanted = widened
        types.append(wanted)
    if problems:
        raise PlanError(problems)
    schema = pa.schema([pa.field(name, t) for name, t in zip(first.schema.names, types)])
    inputs = [_cast(qp, stream, original, schema, updating, pipeline) for stream, original in zip(streams, planned)]
    times = frozenset(
        name for index, name in enumerate(schema.names)
        if all(s.schema.names[index] in s.time_attributes for s in streams)
    )
    if updating:
        schema = schema.append(pa.field(ROW_KIND, ROW_KIND_TYPE))
    node = qp.builder.add(pipeline, "union", union_operator.UnionConfig(inputs=len(inputs)), schema,
                          [Edge(s.node_id) for s in inputs],
                          f"Union(all=[true], inputs=[{len(inputs)}])")
    return Stream(node.id, schema, times, " UNION ALL ".join(dict.fromkeys(s.name for s in streams)),
                  append_only=not updating, window_columns=_agreed_bounds(streams))


def _agreed_bounds(streams: list[Stream]) -> dict:
    """The window bounds of a union's output: a column is one where it is the same bound of the
    same window in every input (a bound in one input and another column in the next is no bound)."""
    out = {}
    for index, name in enumerate(streams[0].schema.names):
        roles = [s.window_bound(s.schema.names[index]) for s in streams]
        first = roles[0]
        if first is not None and all(r is not None and r[0] == first[0] and same_window(r[1], first[1])
                                     for r in roles[1:]):
            out[name] = first
    return out


def _columns_only(stream: Stream) -> Stream:
    """The stream as the union compares it: its columns without the row kind."""
    if ROW_KIND not in stream.schema.names:
        return stream
    return Stream(stream.node_id, pa.schema([f for f in stream.schema if f.name != ROW_KIND]),
                  stream.time_attributes, stream.name, stream.append_only, stream.upsert_key, stream.window_columns)


def _item(query: exp.Expression, index: int) -> exp.Expression:
    """The ``index``-th select item of a query (to point at), or the query."""
    if isinstance(query, exp.Select) and index < len(query.expressions):
        return query.expressions[index]
    return query


def _cast(qp: QueryPlanning, stream: Stream, original: Stream, schema: pa.Schema, updating: bool,
          pipeline: str) -> Stream:
    """``stream`` with the union's column types (a calc casting the columns that differ) and, in an
    updating union, a row kind (+I for an append-only input)."""
    add_kind = updating and original.append_only
    if [f.type for f in stream.schema] == [f.type for f in schema] and not add_kind:
        return original
    projection = [
        [name, quote(name) if f.type == target.type else f"CAST({quote(name)} AS {duckdb_name(target.type)})"]
        for name, f, target in zip(stream.schema.names, stream.schema, schema)
    ]
    fields = [f.with_type(t.type) for f, t in zip(stream.schema, schema)]
    if updating:
        projection.append([ROW_KIND, f"CAST({INSERT} AS TINYINT)" if add_kind else quote(ROW_KIND)])
        fields.append(pa.field(ROW_KIND, ROW_KIND_TYPE))
    cast_schema = pa.schema(fields)
    added = qp.builder.add(pipeline, "calc", CalcConfig(projection=projection), cast_schema,
                           [Edge(original.node_id)], calc_description(projection, None, original.schema.names))
    return Stream(added.id, cast_schema, stream.time_attributes, stream.name, append_only=not updating,
                  window_columns=stream.window_columns)

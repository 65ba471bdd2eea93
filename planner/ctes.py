"""Common table expressions: ``WITH a AS (...), b AS (...) SELECT ...``.

A CTE is a view scoped to its statement: every reference to its name plans
its query again where it is used, as a view is expanded (sources are shared
all the same). A CTE sees the CTEs defined before it in its WITH and those
of enclosing queries; a name defined in a WITH hides a table or view of the
same name. ``WITH a(x, y) AS (...)`` renames the query's columns. ``WITH
RECURSIVE`` is refused: a streaming query has no fixpoint to iterate to.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from weir.engine.graph import Edge
from weir.engine.operators.calc import CalcConfig
from weir.planner.calc import calc_description
from weir.planner.expressions import quote
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning


@dataclass(frozen=True)
class CommonTable:
    name: str
    query: exp.Expression
    #: Column names given as ``name(a, b)``, if any.
    columns: tuple[str, ...]
    #: The CTEs this one may read: those in scope where it was defined.
    scope: tuple
    node: exp.Expression


def plan_with(qp: QueryPlanning, query: exp.Expression, pipeline: str) -> Stream:
    with_ = query.args["with_"]
    if with_.args.get("recursive"):
        raise qp.fail("WITH RECURSIVE is not supported in a streaming query", with_,
                      "a stream has no fixpoint to iterate to; write the steps as separate CTEs")
    scope = qp.ctes
    defined: set[str] = set()
    for cte in with_.expressions:
        name = cte.alias
        if name.lower() in defined:
            raise qp.fail(f"WITH defines `{name}` twice", cte, "give each common table expression its own name")
        defined.add(name.lower())
        alias = cte.args.get("alias")
        columns = tuple(c.name for c in alias.columns) if alias is not None and alias.columns else ()
        scope = scope + (CommonTable(name, cte.this, columns, scope, cte),)
    body = query.copy()
    body.set("with_", None)
    outer = qp.ctes
    qp.ctes = scope
    try:
        return qp.plan_query(body, pipeline)
    finally:
        qp.ctes = outer


def plan_cte_reference(qp: QueryPlanning, table: exp.Table, pipeline: str) -> Stream | None:
    """The stream of the CTE ``table`` names, or None when no CTE in scope has that name."""
    if table.args.get("db"):
        return None
    found = next((c for c in reversed(qp.ctes) if c.name.lower() == table.name.lower()), None)
    if found is None:
        return None
    outer = qp.ctes
    qp.ctes = found.scope
    try:
        stream = qp.plan_query(found.query, pipeline)
    finally:
        qp.ctes = outer
    if found.columns:
        stream = _rename(qp, stream, found, pipeline)
    return dataclasses.replace(stream, name=found.name)


def _rename(qp: QueryPlanning, stream: Stream, cte: CommonTable, pipeline: str) -> Stream:
    if len(cte.columns) != len(stream.schema):
        raise qp.fail(f"`{cte.name}` names {len(cte.columns)} columns but its query gives {len(stream.schema)} "
                      f"({', '.join(stream.schema.names)})", cte.node,
                      "name every column of the query, or none")
    projection = [[new, quote(old)] for new, old in zip(cte.columns, stream.schema.names)]
    schema = pa.schema([f.with_name(new) for f, new in zip(stream.schema, cte.columns)])
    node = qp.builder.add(pipeline, "calc", CalcConfig(projection=projection), schema,
                          [Edge(stream.node_id)], calc_description(projection, None, stream.schema.names))
    times = frozenset(new for new, old in zip(cte.columns, stream.schema.names) if old in stream.time_attributes)
    bounds = {new: stream.window_columns[old] for new, old in zip(cte.columns, stream.schema.names)
              if old in stream.window_columns}
    return dataclasses.replace(stream, node_id=node.id, schema=schema, time_attributes=times, window_columns=bounds)

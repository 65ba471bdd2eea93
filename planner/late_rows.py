"""A source's late-rows table: ``'source.late-rows.table' = 'late_bids'`` in its WITH clause.

Every row of the source that a window operator drops as late (its windows
fired already) lands in the DuckDB table ``late_bids`` of the job's result
database, next to the materialized views: the source's columns, then
``weir_operator`` (the operator that dropped it) and ``weir_watermark`` (the
watermark it was behind). A row late at two operators (two pipelines) is there
twice, once per operator.

Planned once the whole script is: each window operator input whose rows come
from that source alone gets the table's columns as SQL over its input rows
(config ``late_rows``, see ``engine/operators/late_rows.py``) and an edge from
its late-rows port into one ``duckdb`` sink, exactly-once like a view's. A
source column the query dropped or replaced before the window is NULL there.
SESSION windows cannot say which rows were late and are refused.

The job's bad-rows table (``plan_bad_rows_table``, 'python.udf.bad-rows.table') is wired the
same way, from the projections that call a Python UDF.
"""
from __future__ import annotations

import dataclasses
import json
import re

import pyarrow as pa

from weir.engine.graph import LATE_ROWS_PORT, Edge
from weir.engine.operators.duckdb_sql import duckdb_name
from weir.engine.operators.late_rows import BAD_ROWS_SCHEMA, OPERATOR_COLUMN, WATERMARK_COLUMN
from weir.engine.operators.registry import operator_class
from weir.engine.runtime.sink_writer import SinkConfig
from weir.planner.catalog import Catalog, TableDef
from weir.planner.expressions import quote
from weir.planner.graph_builder import GraphBuilder
from weir.planner.locate import locate, quoted
from weir.planner.udfs import compute_udf_arguments
from weir.sql.errors import Problem, WeirSqlError

OPTION = "source.late-rows.table"


def late_rows_schema(table: TableDef) -> pa.Schema:
    return pa.schema([*table.schema, pa.field(OPERATOR_COLUMN, pa.string()),
                      pa.field(WATERMARK_COLUMN, pa.timestamp("ms"))])


def plan_late_rows_tables(builder: GraphBuilder, catalog: Catalog, db_path: str) -> list[str]:
    """Wire the late-rows table of every source the job reads that has one (into the graph of
    ``builder``, the tables declared in ``catalog``, each a table of the DuckDB file ``db_path``);
    their names."""
    graph = builder.graph
    names = []
    for key in builder.sources:
        table = catalog.tables[key]
        name = table.options.get(OPTION)
        if not name:
            continue
        where = locate(table.statement, quoted(OPTION) + r"\s*=", after=r"\bWITH\b")
        if catalog.lookup(name) is not None:
            raise WeirSqlError(Problem(f"the late-rows table of `{table.name}` is `{name}`, which is already a "
                                       "table or view", *where, "name the late-rows table something else"))
        if any(n.id == f"{name}.sink" for n in graph.nodes):  # planned already (script() asked twice)
            names.append(name)
            continue
        readers = []
        for node in graph.nodes:
            kind = operator_class(node.kind)
            if not kind.windowed:
                continue
            for index, edge in enumerate(node.inputs):
                if edge.port != 0 or graph.source_tables(edge.source) != (table.name,):
                    continue
                if not kind.late_rows_table:
                    raise WeirSqlError(Problem(
                        f"`{table.name}` keeps its late rows in `{name}`, but the SESSION window of {node.id} "
                        "cannot tell which rows were late", *where,
                        f"drop '{OPTION}' from `{table.name}`, or window it with TUMBLE, HOP or CUMULATE"))
                columns = graph.node(edge.source).output_schema
                node.config = _with_late_rows(node.config, index, _projection(table.schema, columns))
                if not any(r.source == node.id for r in readers):  # a self-join: one edge for both sides
                    readers.append(Edge(node.id, "forward", (), LATE_ROWS_PORT))
        if not readers:  # no window reads the source: no row can be late
            continue
        options = {"connector": "duckdb", "path": db_path, "table-name": name, "sink.mode": "replace"}
        builder.add(name, "sink", SinkConfig(options=options, table=name), late_rows_schema(table), readers,
                            f"Sink(late rows of=[{table.name}], table=[{name}], connector=[duckdb])")
        names.append(name)
    return names


def _projection(source: pa.Schema, columns: pa.Schema) -> list[list[str]]:
    """The source's columns from the window operator's input rows: by name where the input still
    has the column with its type, else NULL."""
    projection = []
    for field in source:
        index = columns.get_field_index(field.name)
        kept = index >= 0 and (columns.field(index).type == field.type or (
            pa.types.is_timestamp(field.type) and pa.types.is_timestamp(columns.field(index).type)))
        projection.append([field.name, quote(field.name) if kept else f"CAST(NULL AS {duckdb_name(field.type)})"])
    return projection


def _with_late_rows(config, index: int, projection: list[list[str]]):
    """``config`` whose ``late_rows`` also hands input ``index``'s late rows on as ``projection``."""
    return dataclasses.replace(config, late_rows={**(config.late_rows or {}), str(index): projection})


#: The job setting naming its bad-rows table: rows a Python UDF raised on (engine ``BadRows``).
BAD_ROWS_SETTING = "python.udf.bad-rows.table"


def plan_bad_rows_table(builder: GraphBuilder, catalog: Catalog, db_path: str, settings: dict[str, str]) -> str | None:
    """With ``SET 'python.udf.bad-rows.table' = 'udf_bad_rows'``: every operator that can keep bad
    rows (its config has ``bad_rows``: a projection and filter) and whose SQL calls one of the
    catalog's Python UDFs keeps the rows a UDF raised on out of its output and sends them, from
    its late-rows port, to one ``duckdb`` sink of that table, exactly-once like a view's (columns:
    ``engine.operators.late_rows.BAD_ROWS_SCHEMA``): a projection and filter, a table function, an
    outer join's condition, and an aggregate's argument or FILTER (computed by a calc before the
    aggregate: ``planner.udfs.compute_udf_arguments``). The table's name, or None when the job has none."""
    name = (settings.get(BAD_ROWS_SETTING) or "").strip()
    if not name or not catalog.functions:
        return None
    if catalog.lookup(name) is not None:
        raise WeirSqlError(Problem(f"the bad-rows table '{BAD_ROWS_SETTING}' is `{name}`, which is already a table "
                                   "or view", None, None, "name the bad-rows table something else"))
    graph = builder.graph
    if any(n.id == f"{name}.sink" for n in graph.nodes):  # planned already (script() asked twice)
        return name
    calls = re.compile("|".join(rf"(?<![\w.]){re.escape(key)}\s*\(" for key in catalog.functions), re.IGNORECASE)
    compute_udf_arguments(builder, calls)  # an aggregate's argument: diverted before the aggregate
    readers = []
    for node in graph.nodes:
        kind = operator_class(node.kind)
        if kind.Config is None or "bad_rows" not in {f.name for f in dataclasses.fields(kind.Config)}:
            continue
        if getattr(kind, "calls_python", False) or calls.search(json.dumps(node.config_json())):
            node.config = dataclasses.replace(node.config, bad_rows=True)
            readers.append(Edge(node.id, "forward", (), LATE_ROWS_PORT))
    if not readers:
        return None
    options = {"connector": "duckdb", "path": db_path, "table-name": name, "sink.mode": "replace"}
    builder.add(name, "sink", SinkConfig(options=options, table=name), BAD_ROWS_SCHEMA, readers,
                f"Sink(rows Python UDFs raised on, table=[{name}], connector=[duckdb])")
    return name

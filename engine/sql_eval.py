"""Evaluate DuckDB SQL over Arrow data: the one place expressions meet DuckDB.

The planner uses ``describe`` to learn the output schema of generated SQL
without running it on data.
"""
from __future__ import annotations

import threading

import duckdb
import pyarrow as pa

from weir.engine.udfs import register_functions, version

#: The name under which an input batch is visible to generated SQL.
INPUT = "input_batch"

_LOCAL = threading.local()


def connection() -> duckdb.DuckDBPyConnection:
    """This thread's connection for ``describe`` and the planner's checks of an expression's
    types (``planner.expressions``), with the Python UDFs the SQL may call as they are now
    (registered again when the registry changed). One per thread, not one per call nor one per
    use: a new in-memory database costs 20-30 ms of CPU, and planning a small job describes
    and checks several expressions."""
    con = getattr(_LOCAL, "con", None)
    if con is None:
        con = _LOCAL.con = duckdb.connect(":memory:")
    if getattr(_LOCAL, "udfs", None) != version():
        register_functions(con)
        _LOCAL.udfs = version()
    return con


def describe(select_sql: str, input_schema: pa.Schema) -> pa.Schema:
    """The Arrow schema of ``select_sql`` (which reads ``input_batch``) over no rows.

    Raises duckdb.Error with DuckDB's message when the SQL does not bind.
    """
    con = connection()
    con.register(INPUT, input_schema.empty_table())
    try:
        return con.sql(f"SELECT * FROM ({select_sql}) LIMIT 0").to_arrow_table().schema
    finally:
        con.unregister(INPUT)

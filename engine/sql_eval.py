"""Evaluate DuckDB SQL over Arrow data: the one place expressions meet DuckDB.

The planner uses ``describe`` to learn the output schema of generated SQL
without running it on data.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa

from weir.engine.udfs import register_functions

#: The name under which an input batch is visible to generated SQL.
INPUT = "input_batch"


def describe(select_sql: str, input_schema: pa.Schema) -> pa.Schema:
    """The Arrow schema of ``select_sql`` (which reads ``input_batch``) over no rows.

    Raises duckdb.Error with DuckDB's message when the SQL does not bind.
    """
    con = duckdb.connect(":memory:")
    try:
        register_functions(con)  # Python UDFs the SQL may call
        con.register(INPUT, input_schema.empty_table())
        return con.sql(f"SELECT * FROM ({select_sql}) LIMIT 0").to_arrow_table().schema
    finally:
        con.close()

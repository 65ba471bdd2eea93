"""Small helpers for building and running the DuckDB SQL the operators generate.

Expressions arrive from the planner as DuckDB SQL text over column names; the
operators wrap them in statements of their own. Identifiers the operators
introduce are always quoted, so a user column named like a keyword works.
"""
from __future__ import annotations

import functools
from typing import Any

import duckdb
import pyarrow as pa

from weir.engine.errors import EngineError


def quote_ident(name: str) -> str:
    """A DuckDB identifier: double quotes, inner quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def string_literal(value: str) -> str:
    """``value`` as a SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def int_literal(value: int) -> str:
    """A BIGINT literal, clamped to the BIGINT range."""
    return str(max(-(2**63), min(2**63 - 1, int(value))))


_DUCKDB_NAMES = {
    pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER", pa.int64(): "BIGINT",
    pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
    pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.date32(): "DATE",
    pa.binary(): "BLOB", pa.time64("us"): "TIME",
}


def duckdb_name(t: pa.DataType) -> str:
    """The DuckDB type of an Arrow type, to CAST to or for a typed NULL (``NULL::<name>``).
    Every timestamp without a time zone is TIMESTAMP (the engine's are µs); a type not
    listed here is named by DuckDB itself."""
    if pa.types.is_timestamp(t) and t.tz is None:
        return "TIMESTAMP"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    return _DUCKDB_NAMES.get(t) or _named_by_duckdb(t)


@functools.lru_cache(maxsize=None)
def _named_by_duckdb(t: pa.DataType) -> str:
    con = duckdb.connect()
    try:
        con.register("t", pa.schema([pa.field("x", t)]).empty_table())
        return str(con.sql("SELECT x FROM t").types[0])
    finally:
        con.close()


def execute(con: duckdb.DuckDBPyConnection, sql: str, operator_id: str) -> list[tuple[Any, ...]]:
    """Run a statement and read its result to the end (an unread result blocks the connection)."""
    try:
        return con.execute(sql).fetchall()
    except duckdb.Error as exc:
        raise _failure(exc, sql, operator_id) from exc


def query_arrow(con: duckdb.DuckDBPyConnection, sql: str, operator_id: str) -> pa.Table:
    try:
        return con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise _failure(exc, sql, operator_id) from exc


def create_table_from_arrow(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table, operator_id: str) -> None:
    """``CREATE TABLE name`` holding the rows of an Arrow table (restoring state)."""
    con.register("restored_state", table)
    try:
        execute(con, f"CREATE TABLE {name} AS SELECT * FROM restored_state", operator_id)
    finally:
        con.unregister("restored_state")


def snapshot_tables(con: duckdb.DuckDBPyConnection, names, ctx, *, version: int, watermark: int,
                    order: str = "key_group") -> dict[str, Any]:
    """A keyed operator's snapshot: its state tables ordered by key group (then ``order``'s other
    columns), with the snapshot version, watermark and max parallelism (``engine.state.keyed_tables``)."""
    tables = {name: query_arrow(con, f"SELECT * FROM {name} ORDER BY {order}", ctx.operator_id) for name in names}
    return {"version": version, "watermark": watermark, "max_parallelism": ctx.max_parallelism, "tables": tables}


#: Starts the message of an ``error()`` weir's own SQL raises (``accumulators.RAISED``).
RAISED = "weir-error: "


def _failure(exc: duckdb.Error, sql: str, operator_id: str) -> EngineError:
    text = str(exc)
    if RAISED in text:  # weir's own check, written in SQL: its message and hint as they are
        message, _, hint = text.split(RAISED, 1)[1].partition(" | hint: ")
        return EngineError(message.strip(), hint=hint.strip() or None, operator_id=operator_id)
    return EngineError(
        f"DuckDB failed: {exc}",
        hint=f"the generated statement was: {' '.join(sql.split())}",
        operator_id=operator_id,
    )

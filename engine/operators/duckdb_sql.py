"""Small helpers for building and running the DuckDB SQL the operators generate.

Expressions arrive from the planner as DuckDB SQL text over column names; the
operators wrap them in statements of their own. Identifiers the operators
introduce are always quoted, so a user column named like a keyword works.
"""
from __future__ import annotations

import functools
from typing import Any

import itertools
import os
import warnings
from pathlib import Path

import duckdb
import pyarrow as pa

from weir.engine.errors import EngineError
from weir.engine.state.staged import STAGING, StagedTable, stage_table
from weir.engine.udfs import take_failure


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


def run_arrow(con: duckdb.DuckDBPyConnection, sql: str, operator_id: str) -> pa.Table:
    """``query_arrow`` with the statement planned once. ``con.sql`` describes a SELECT (binding
    and planning it) before it runs it (planning it again), which for a small firing is a third
    of its cost (Nexmark q5's cascaded MAX: 7.4 -> 5.5 ms a firing); the DB-API result read here
    copies its rows once more, so this is for results of a few batches."""
    try:
        result = con.execute(sql)
        with warnings.catch_warnings():  # that it copies the rows once more: taken on purpose
            warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)
            return result.to_arrow_table()
    except duckdb.Error as exc:
        raise _failure(exc, sql, operator_id) from exc


#: Rows per Arrow batch an operator streams out of DuckDB (a large result is never held whole
#: outside DuckDB, whose own memory is limited and spills). Results do not depend on it.
OUTPUT_BATCH_ROWS = 65_536
#: An environment variable that sets the rows per batch of a snapshot's state table (default
#: ``OUTPUT_BATCH_ROWS``): a table of more than two batches is staged. For tests, which set it to
#: stage small tables in worker processes (Ray actors are given the driver's WEIR_ variables).
SNAPSHOT_BATCH_ROWS_VARIABLE = "WEIR_SNAPSHOT_BATCH_ROWS"


class ArrowStream:
    """The rows of a query as Arrow batches read from DuckDB one at a time (an iterator, with
    the result's ``schema``); ``close()`` ends the query early."""

    def __init__(self, reader: pa.RecordBatchReader, sql: str, operator_id: str):
        self.schema = reader.schema
        self._reader, self._sql, self._operator_id = reader, sql, operator_id

    def __iter__(self) -> "ArrowStream":
        return self

    def __next__(self) -> pa.RecordBatch:
        while self._reader is not None:
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                self.close()
                break
            except (duckdb.Error, pa.ArrowException) as exc:  # an error while DuckDB runs the query
                self.close()
                raise _failure(exc, self._sql, self._operator_id) from exc
            if batch.num_rows:
                return batch
        raise StopIteration

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def stream_arrow(con: duckdb.DuckDBPyConnection, sql: str, operator_id: str,
                 batch_rows: int | None = None) -> ArrowStream:
    """The rows of a query as Arrow batches of at most ``batch_rows`` rows (default
    ``OUTPUT_BATCH_ROWS``), read from DuckDB as the stream is: only the batch being read lives
    outside DuckDB. The query starts at once (its errors are raised here). An open stream
    blocks ``con``: stream from a ``cursor()`` where the connection is used meanwhile."""
    try:
        reader = con.sql(sql).to_arrow_reader(batch_rows or OUTPUT_BATCH_ROWS)
    except duckdb.Error as exc:
        raise _failure(exc, sql, operator_id) from exc
    return ArrowStream(reader, sql, operator_id)


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
    columns), with the snapshot version, watermark and max parallelism (``engine.state.keyed_tables``).
    A large table is written to a Parquet file as it is read (``snapshot_table``)."""
    tables = {name: snapshot_table(con, f"SELECT * FROM {name} ORDER BY {order}", ctx, name) for name in names}
    return {"version": version, "watermark": watermark, "max_parallelism": ctx.max_parallelism, "tables": tables}


def snapshot_table(con: duckdb.DuckDBPyConnection, sql: str, ctx, name: str) -> "pa.Table | StagedTable":
    """The rows of ``sql`` (a state table ordered by key group) for a snapshot: an Arrow table
    when they fit in two output batches, else — where the job has a state directory — a Parquet
    file written batch by batch under its ``snapshots`` folder (``StagedTable``), which the
    checkpoint writer moves into the checkpoint. Either way no more than two batches of the
    state are ever held outside DuckDB."""
    stream = stream_arrow(con, sql, ctx.operator_id, int(os.environ.get(SNAPSHOT_BATCH_ROWS_VARIABLE) or 0) or None)
    head = [batch for _, batch in zip(range(2), stream)]
    if len(head) < 2 or not ctx.spill_dir:
        return pa.Table.from_batches([*head, *stream], stream.schema)
    return stage_table(Path(ctx.spill_dir) / STAGING, ctx.operator_id, name, stream.schema,
                       itertools.chain(head, stream))


#: Starts the message of an ``error()`` weir's own SQL raises (``accumulators.RAISED``).
RAISED = "weir-error: "


#: How DuckDB reports an exception raised by a Python UDF (``engine.udfs`` records which, and where).
UDF_FAILED = "Python exception occurred while executing the UDF"


def _failure(exc: Exception, sql: str, operator_id: str) -> EngineError:
    text = str(exc)
    if UDF_FAILED in text:
        failure = take_failure()
        if failure is not None:
            return failure.engine_error(operator_id)
    if RAISED in text:  # weir's own check, written in SQL: its message and hint as they are
        message, _, hint = text.split(RAISED, 1)[1].partition(" | hint: ")
        return EngineError(message.strip(), hint=hint.strip() or None, operator_id=operator_id)
    return EngineError(
        f"DuckDB failed: {exc}",
        hint=f"the generated statement was: {' '.join(sql.split())}",
        operator_id=operator_id,
    )

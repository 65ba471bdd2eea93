"""The session database (`--db`): the DuckDB file where materialized views live.

DuckDB lets one process at a time write a file, and within a process every
connection to it must share one configuration. Jobs in this process write
it through the duckdb sink, which opens it read-write and closes it after
each commit; the shell opens it the same way, read-write, for one query at a
time, and closes it again, so that the sinks and other processes can get
at the file between queries. A query sees the last committed state of each
table: a commit is one DuckDB transaction.
"""
from __future__ import annotations

import os
import tempfile
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from weir.engine.changelog import ROW_KIND

LOCK_WAIT_SECONDS = 10.0
_HELD_ELSEWHERE = ("lock", "different configuration")


class DatabaseError(Exception):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class ResultDatabase:
    def __init__(self, path: str):
        self.path = path

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def connect(self, wait: float = LOCK_WAIT_SECONDS) -> duckdb.DuckDBPyConnection:
        """Open the file read-write (as the duckdb sink does), waiting while another process holds it."""
        deadline = time.monotonic() + wait
        while True:
            try:
                return duckdb.connect(self.path)
            except (duckdb.IOException, duckdb.ConnectionException) as error:
                held = any(sign in str(error).lower() for sign in _HELD_ELSEWHERE)
                if not held or time.monotonic() >= deadline:
                    raise DatabaseError(
                        f"cannot open {self.path}: {str(error).splitlines()[0]}",
                        "another process holds the database; stop it (a `weir run` or a DuckDB client) and retry",
                    ) from None
                time.sleep(0.05)

    def query(self, sql: str) -> pa.Table:
        if not self.exists:
            connection = duckdb.connect(":memory:")
        else:
            connection = self.connect()
        try:
            # One SQL in the shell: '/' between integers divides as integers, as in a streaming query
            # (Flink's meaning); the setting is this connection's alone.
            connection.execute("SET SESSION integer_division = true")
            relation = connection.sql(sql)
            return relation.to_arrow_table() if relation is not None else pa.table({})
        except duckdb.Error as error:
            raise DatabaseError(f"query failed: {str(error).splitlines()[0]}", self._hint(error)) from None
        finally:
            connection.close()

    def _hint(self, error: duckdb.Error) -> str | None:
        if isinstance(error, duckdb.CatalogException):
            if not self.exists:
                return f"there is no database at {self.path} yet: CREATE MATERIALIZED VIEW fills it"
            return f"the result tables in {self.path}: {', '.join(self.tables()) or 'none'}"
        return None

    def tables(self, wait: float = LOCK_WAIT_SECONDS) -> dict[str, list[tuple[str, str]]]:
        """Result tables (weir's bookkeeping tables left out) and their (column, type)s."""
        if not self.exists:
            return {}
        connection = self.connect(wait)
        try:
            rows = connection.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "ORDER BY table_name, ordinal_position").fetchall()
        finally:
            connection.close()
        found: dict[str, list[tuple[str, str]]] = {}
        for table, column, data_type in rows:
            if not table.startswith("_weir"):
                found.setdefault(table, []).append((column, data_type))
        return found

    def create_if_missing(self, table: str, schema: pa.Schema) -> None:
        """An empty result table, as the duckdb sink creates it when its job opens,
        so that the view can be queried from the moment its job starts: the sink's columns
        without its input's row kind (an updating view's table holds rows, not changes)."""
        schema = pa.schema([f for f in schema if f.name != ROW_KIND])
        # From a Parquet file, not a registered Arrow table: a Python object scan on a
        # database that job threads of this process also write fails at times (as in the sink).
        with tempfile.TemporaryDirectory(prefix="weir-schema-") as folder:
            schema_file = os.path.join(folder, "schema.parquet")
            pq.write_table(schema.empty_table(), schema_file)
            connection = self.connect()
            try:
                connection.execute(f"CREATE TABLE IF NOT EXISTS {_quoted(table)} AS "
                                   "SELECT * FROM read_parquet(?) LIMIT 0", [schema_file])
            finally:
                connection.close()

    def drop(self, table: str) -> None:
        connection = self.connect()
        try:
            connection.execute(f"DROP TABLE IF EXISTS {_quoted(table)}")
        finally:
            connection.close()


def _quoted(table: str) -> str:
    return '"' + table.replace('"', '""') + '"'

"""The session database (`--db`): the DuckDB file where materialized views live.

The file is a published snapshot (``weir.engine.connectors.duckdb_snapshot``):
jobs never write it in place but rename a new complete file over it at each
checkpoint. So a reader never blocks a job and always sees one committed
checkpoint of every table. ``open_results(path)`` is THE way to read it: a
read-only connection on the latest snapshot, held as long as its user likes.
The shell's changes outside jobs (an empty table for a new view, DROP) are
published like a commit.
"""
from __future__ import annotations

import concurrent.futures
import os
import tempfile
import threading

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from weir.engine.changelog import ROW_KIND
from weir.engine.connectors.duckdb_snapshot import catalog_name, open_snapshot, publisher_for

#: How long a change made here waits for a job's publish to the same database.
LOCK_WAIT_SECONDS = 10.0


def open_results(path: str, connection: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection on the latest committed snapshot of the results database at
    ``path`` (which must exist): every table as of one completed checkpoint, unchanged for as long
    as the connection is open, whatever jobs commit meanwhile; any number may be open, in any
    process, and none delays a job. The file is ATTACHed (read-only) to a fresh in-memory
    database and made the default catalog, so unqualified table names resolve to it; the
    catalog is named after the file (``weir`` for weir.duckdb). Close it to see newer commits.
    ``connection``: a fresh in-memory DuckDB made beforehand to attach it to."""
    return open_snapshot(path, connection)


class LatestResults:
    """Cursors on the latest committed snapshot of the results database at ``path``, for a
    program that answers many queries (the shell, a server): ``cursor()`` is a new DuckDB
    connection (its own settings and transaction; one per thread or query) on the snapshot
    that was the latest when it was made, and it sees that snapshot until it is closed. The
    snapshot is opened once (``open_results``) and opened again only when a job has published
    a newer one since (the file at ``path`` is another file); one dropped by every cursor is
    closed by DuckDB. With no file at ``path`` yet, cursors are on an empty in-memory
    database."""

    def __init__(self, path: str, *, sealed: bool = False):
        self.path = path
        #: Queries read the snapshot and no other file (DuckDB's external access off: no
        #: read_csv, no ATTACH), for a server answering clients (``weir serve``).
        self.sealed = sealed
        self._lock = threading.Lock()
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._stamp: tuple | None = None
        #: A fresh in-memory DuckDB made in the background for the next snapshot, so that
        #: opening one after a publish (SUBSCRIBE's read) does not wait the ~30 ms it takes.
        self._spare: concurrent.futures.Future | None = None

    def cursor(self) -> duckdb.DuckDBPyConnection:
        stamp = _stamp(self.path)
        with self._lock:
            if self._connection is None or stamp != self._stamp:
                spare = self._spare.result() if self._spare is not None else None
                self._spare = _SPARES.submit(duckdb.connect, ":memory:")
                self._connection = open_results(self.path, spare) if stamp else spare or duckdb.connect(":memory:")
                if self.sealed:
                    self._connection.execute("SET enable_external_access = false")
                self._stamp = stamp
            cursor = self._connection.cursor()
        if stamp:
            cursor.execute(f'USE "{catalog_name(self.path)}"')
        return cursor

    def close(self) -> None:
        with self._lock:
            self._connection, self._stamp, self._spare = None, None, None


_SPARES = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="weir-results-spare")


def _stamp(path: str) -> tuple | None:
    """Which file is at ``path`` (each publish renames a new one there); None: none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_ino, found.st_dev, found.st_mtime_ns, found.st_size


class DatabaseError(Exception):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class ResultDatabase:
    def __init__(self, path: str):
        self.path = path
        self.latest = LatestResults(path)

    @property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def connect(self) -> duckdb.DuckDBPyConnection:
        """A connection on the latest committed snapshot (``LatestResults.cursor``); close it."""
        return self.latest.cursor()

    def query(self, sql: str) -> pa.Table:
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

    def answer(self, sql: str):
        """The answer of ``sql`` kept in DuckDB (``render.DuckAnswer``: the shell shows its first
        and last rows without fetching the rest); an Arrow table for a statement that is no query
        (SHOW, DESCRIBE, PRAGMA)."""
        from weir.shell.render import DuckAnswer, query_answer

        connection = self.connect()
        try:
            connection.execute("SET SESSION integer_division = true")
            answer = query_answer(connection, sql)
        except duckdb.Error as error:
            connection.close()
            raise DatabaseError(f"query failed: {str(error).splitlines()[0]}", self._hint(error)) from None
        if not isinstance(answer, DuckAnswer):
            connection.close()
        return answer if answer is not None else pa.table({})

    def _hint(self, error: duckdb.Error) -> str | None:
        if isinstance(error, duckdb.CatalogException):
            if not self.exists:
                return f"there is no database at {self.path} yet: CREATE MATERIALIZED VIEW fills it"
            return f"the result tables in {self.path}: {', '.join(self.tables()) or 'none'}"
        return None

    def tables(self, wait: float = LOCK_WAIT_SECONDS) -> dict[str, list[tuple[str, str]]]:
        """Result tables (weir's bookkeeping tables left out) and their (column, type)s.
        (``wait`` is kept for callers: reading never waits.)"""
        if not self.exists:
            return {}
        connection = self.connect()
        try:
            rows = connection.execute(
                "SELECT table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_catalog = current_database() ORDER BY table_name, ordinal_position").fetchall()
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
            if table in self.tables():
                return
            with self._change() as connection:
                connection.execute(f"CREATE TABLE IF NOT EXISTS {_quoted(table)} AS "
                                   "SELECT * FROM read_parquet(?) LIMIT 0", [schema_file])

    def drop(self, table: str) -> None:
        with self._change() as connection:
            connection.execute(f"DROP TABLE IF EXISTS {_quoted(table)}")

    def _change(self):
        """A change published as a new snapshot, as a job's commit is."""
        return publisher_for(self.path).change(LOCK_WAIT_SECONDS)


def _quoted(table: str) -> str:
    return '"' + table.replace('"', '""') + '"'

"""Every read of the result database by the Postgres endpoint goes through here.

``ResultReader.cursor()`` hands out a DuckDB cursor on the result database for
one query. The file is opened when a query starts and no other is running,
shared by the queries that overlap it, and closed as soon as the last of them
is done: between queries nothing holds the file, so the job's sink and other
processes get at it as they do today (``shell/database.py``'s rule). A server
in the process that runs the job (``weir run --serve``) opens it read-write,
as the sink does (DuckDB wants one configuration per file in a process, and
the two then share one database instance, so DuckDB's file functions stay
available to a query); ``weir serve`` alone opens it read-only, with DuckDB's
external access off (a query reads no file but the database). Reads through a cursor see the last committed checkpoint: a commit
is one DuckDB transaction.

This module is the one seam to re-point when results are served another way
(a long-lived connection of the running job, published snapshots).
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

import duckdb

from weir.shell.database import LOCK_WAIT_SECONDS, DatabaseError, ResultDatabase

RETRY_PAUSE_SECONDS = 0.005
#: `weir serve` alone: a query reads the database and nothing else (no read_csv of any file).
READ_ONLY_CONFIG = {"enable_external_access": False}


class ResultReader:
    def __init__(self, db_path: str, *, beside_jobs: bool):
        self.database = ResultDatabase(db_path)
        self.beside_jobs = beside_jobs
        self._lock = threading.Lock()
        self._connection: duckdb.DuckDBPyConnection | None = None
        self._users = 0

    @contextlib.contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for one query; the file is closed after it unless another query runs."""
        with self._lock:
            if self._connection is None:
                self._connection = self._open()
            self._users += 1
            cursor = self._connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._connection.close()
                    self._connection = None

    def _open(self) -> duckdb.DuckDBPyConnection:
        if not self.database.exists:
            return duckdb.connect(":memory:")
        if self.beside_jobs:
            return self.database.connect()
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:  # a job's commit holds the file for a moment: wait, as ResultDatabase does
            try:
                return duckdb.connect(self.database.path, read_only=True, config=READ_ONLY_CONFIG)
            except (duckdb.IOException, duckdb.ConnectionException) as error:
                if time.monotonic() >= deadline:
                    raise DatabaseError(f"cannot open {self.database.path}: {str(error).splitlines()[0]}",
                                        "a process holds the database for writing; retry") from None
                time.sleep(RETRY_PAUSE_SECONDS)

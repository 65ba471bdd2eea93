"""Every read of the result database by the Postgres endpoint goes through here.

``ResultReader.cursor()`` hands out a DuckDB cursor for one query on the latest
committed snapshot of the result database (``shell.database.LatestResults``):
each checkpoint's commit is published as a new file renamed over the database,
so a query sees one whole checkpoint, and no query, however long, delays a
job's commit. The snapshot is opened once and again only when a newer one has
been published. ``weir serve`` seals its snapshots (DuckDB's external access
off: a query reads no file but the database); beside a job (``weir run
--serve``) the same holds, the job writing through its own files.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import duckdb

from weir.shell.database import LatestResults


class ResultReader:
    def __init__(self, db_path: str, *, beside_jobs: bool):
        self.beside_jobs = beside_jobs
        self.latest = LatestResults(db_path, sealed=True)

    @contextlib.contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for one query, on the snapshot that is the latest as it starts."""
        cursor = self.latest.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

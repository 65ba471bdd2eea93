"""Every read of the result database by the Postgres endpoint goes through here.

``ResultReader.cursor()`` hands out a DuckDB cursor for one query on the latest
committed snapshot of the result database (``shell.database.LatestResults``):
each checkpoint's commit is published as a new file renamed over the database,
so a query sees one whole checkpoint, and no query, however long, delays a
job's commit. The snapshot is opened once and again only when a newer one has
been published. ``weir serve`` seals its snapshots (DuckDB's external access
off: a query reads no file but the database); beside a job (``weir run
--serve``) the same holds, the job writing through its own files.

Each query thread keeps its cursor from one query to the next while no newer
snapshot has been published (a new cursor and its ``USE`` cost as much as a
point query): before each query the file at the path is looked at (one
``stat``), and a cursor made before the latest publish is closed and replaced,
so a query sees what a new cursor would. A query that fails drops its cursor.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import duckdb

from weir.shell.database import LatestResults, _stamp


class ResultReader:
    def __init__(self, db_path: str, *, beside_jobs: bool):
        self.beside_jobs = beside_jobs
        self.latest = LatestResults(db_path, sealed=True)
        self._local = threading.local()  # this thread's (stamp, cursor)

    @contextlib.contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor for one query, on the snapshot that is the latest as it starts."""
        with self.stamped() as (_, cursor):
            yield cursor

    @contextlib.contextmanager
    def stamped(self) -> Iterator[tuple[tuple | None, duckdb.DuckDBPyConnection]]:
        """``cursor()`` with the stamp of the file it was made for (its snapshot is that one or newer)."""
        stamp = _stamp(self.latest.path)
        held = getattr(self._local, "held", None)
        if held is not None and held[0] != stamp:
            held[1].close()
            held = None
        if held is None:
            # The stamp is taken before the cursor: a publish in between gives a cursor newer
            # than its stamp, which the next query replaces; never an older one kept.
            held = (stamp, self.latest.cursor())
        self._local.held = None  # not shared with a query that runs inside this one
        try:
            yield held
        except BaseException:
            held[1].close()
            raise
        self._local.held = held

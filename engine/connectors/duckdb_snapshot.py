"""Published snapshots of a DuckDB results database: readers never block a writer.

DuckDB locks a file exclusively for a read-write process and shared for
read-only ones, so a reader holding the results file open would stall every
commit. Instead the file at the database's path is never written in place:
each change is published as a new, complete file renamed over it.

1. A writer takes the publish lock, an ``flock`` on ``<database>.weir-lock``
   (writers of every process take turns; readers never touch it; the kernel
   drops it when its process dies). Waiting for it is counted in
   ``lock_waits``; only another writer's publish can make one wait.
2. Under the lock, files a killed writer left (``<database>.weir-next-*``) or
   a killed reader left (``<database>.weir-reader-*``, see ``open_snapshot``) are
   deleted, and the published file is copied byte for byte (it is closed and
   never changes) to a new ``<database>.weir-next-<id>``; a missing database
   starts empty. A ``<database>.wal`` (someone wrote to the published file
   outside weir) is first checkpointed into the file (the one case where a
   process holding the file can make a writer wait: it wrote to it).
3. The writer opens the copy and applies its transactions there: each sink's
   commit with its ``_weir_sink_commits`` records, as before, so exactly-once
   and recovery read the commit log from the published file.
4. ``publish``: CHECKPOINT and close the copy (no WAL is left), fsync it,
   rename it onto the database's path (atomic), fsync the folder, release the
   lock; then the writers' after-publish steps run (a sink deletes the staged
   files the published file now contains: until then they stay, so a process
   killed before the rename loses nothing, and its restart commits them again).

A reader opens the path read-only (``duckdb.connect(path, read_only=True)``,
the DuckDB CLI's ``-readonly``, or ``shell.database.open_results``) and keeps
the inode it opened: one complete published snapshot, for as long as it holds
it. A new reader sees the latest one. Nothing a reader does delays a writer.

Grouping: the commits of one checkpoint by every sink of a job on the same
database (in this process) go into one snapshot, so two tables a checkpoint
changed are published together. A sink ``join``s the group of its job when it
opens; each ``commit(member, checkpoint_id, apply)`` applies to the pending
copy, and the copy is published once every member of the job has reached that
checkpoint (a member with nothing to commit reports it as well), or when a
member leaves (``leave``: at the end of its job or when it fails), or when a
later checkpoint arrives first. Changes outside a checkpoint (creating a
table, withdrawing, the shell's DROP) are published at once.
"""
from __future__ import annotations

import fcntl
import glob
import os
import shutil
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Callable, Iterator

import duckdb

from weir.engine import faults
from weir.engine.errors import EngineError

RETRY_PAUSE_SECONDS = 0.005


class SnapshotPublisher:
    """This process's writer of one results database (``publisher_for(path)``)."""

    def __init__(self, path: str):
        self.path = path
        self.lock_path = f"{path}.weir-lock"
        self._lock = threading.RLock()
        self._lock_file: int | None = None
        #: The copy being changed, and its open connection (under the publish lock).
        self._next: str | None = None
        self._connection: duckdb.DuckDBPyConnection | None = None
        #: What to do once the pending copy is published (a sink's staged files to delete).
        self._after: list[Callable[[], None]] = []
        #: job -> member -> the latest checkpoint the member has committed.
        self._members: dict[str, dict[object, int]] = {}
        #: job -> the checkpoint whose commits the pending copy holds.
        self._waiting: dict[str, int] = {}
        #: Figures for tests and benchmarks: snapshots published, waits for another writer's lock.
        self.published = 0
        self.lock_waits = 0
        self.last_publish_seconds = 0.0

    # -- the group of a job's sinks --------------------------------------------
    def join(self, job: str, member: object) -> None:
        with self._lock:
            self._members.setdefault(job, {}).setdefault(member, -1)

    def leave(self, job: str, member: object) -> None:
        """``member`` commits nothing more (its job ended or failed): what waited for it goes out."""
        with self._lock:
            self._members.get(job, {}).pop(member, None)
            if self._connection is not None and self._complete():
                self.publish()

    def commit(self, job: str, member: object, checkpoint_id: int,
               apply: Callable[[duckdb.DuckDBPyConnection], None] | None, after: Callable[[], None] | None,
               *, timeout: float) -> None:
        """``member`` of ``job`` commits ``checkpoint_id``: ``apply`` (None: nothing to write) runs on
        the pending copy, in the transaction it opens; the copy is published when the job's group
        is complete."""
        with self._lock:
            members = self._members.setdefault(job, {})
            if self._waiting.get(job, checkpoint_id) < checkpoint_id:
                self.publish()  # a member never reached the checkpoint pending: it is not waited for
            if apply is not None:
                try:
                    apply(self.connection(timeout))
                except BaseException:
                    if not self._waiting:
                        self.discard()  # nothing else pending: free the lock at once
                    raise
                self._waiting[job] = checkpoint_id
                if after is not None:
                    self._after.append(after)
            members[member] = max(members.get(member, -1), checkpoint_id)
            if self._connection is not None and self._complete():
                self.publish()

    def _complete(self) -> bool:
        return all(self._members.get(job, {}).get(m, checkpoint_id) >= checkpoint_id
                   for job, checkpoint_id in self._waiting.items()
                   for m in self._members.get(job, {}))

    @contextmanager
    def change(self, timeout: float, after: Callable[[], None] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A change outside a checkpoint, published at once (with anything pending); ``after``
        runs once it is published. A change that raises is not published."""
        with self._lock:
            try:
                yield self.connection(timeout)
            except BaseException:
                if not self._waiting:
                    self.discard()
                raise
            if after is not None:
                self._after.append(after)
            self.publish()

    # -- the pending copy ----------------------------------------------------------
    def connection(self, timeout: float) -> duckdb.DuckDBPyConnection:
        """The pending copy's connection: steps 1 and 2 on first use."""
        with self._lock:
            if self._connection is None:
                self._take_lock(timeout)
                try:
                    self._connection = self._copy(timeout)
                except BaseException:
                    self._release()
                    raise
            return self._connection

    def _take_lock(self, timeout: float) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        handle = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited:
                    waited = True
                    self.lock_waits += 1
                if time.monotonic() >= deadline:
                    os.close(handle)
                    raise EngineError(
                        f"cannot publish to the DuckDB database '{self.path}': another process has been "
                        f"publishing to it for {timeout:g} s (it holds {self.lock_path})",
                        hint="is another weir job stuck while committing to the same database? "
                             "raise 'sink.lock-timeout', or give the jobs different databases",
                    ) from None
                time.sleep(RETRY_PAUSE_SECONDS)
        self._lock_file = handle

    def _copy(self, timeout: float) -> duckdb.DuckDBPyConnection:
        for stale in glob.glob(glob.escape(self.path) + ".weir-next-*"):
            os.remove(stale)  # a killed writer's: never published, so nobody reads it
        for stale in glob.glob(glob.escape(self.path) + ".weir-reader-*"):
            try:  # a killed reader's link (a live one is unlinked once attached: maybe just now)
                os.remove(stale)
            except FileNotFoundError:
                pass
        self._next = f"{self.path}.weir-next-{uuid.uuid4().hex[:12]}"
        if os.path.exists(self.path):
            if os.path.exists(f"{self.path}.wal"):
                self._merge_outside_changes(timeout)
            shutil.copyfile(self.path, self._next)
        return duckdb.connect(self._next)

    def _merge_outside_changes(self, timeout: float) -> None:
        """The published file has a WAL: a process outside weir wrote to it. Checkpoint it in place,
        waiting up to ``timeout`` while a process has the file open, so that its changes are copied
        (and no WAL is left beside a file it does not belong to)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with duckdb.connect(self.path) as outside:
                    outside.execute("CHECKPOINT")
                return
            except (duckdb.IOException, duckdb.ConnectionException) as error:
                if time.monotonic() >= deadline:
                    raise EngineError(
                        f"cannot publish to the DuckDB database '{self.path}': another process wrote to it "
                        f"({self.path}.wal) and still has it open ({str(error).splitlines()[0]})",
                        hint="the results database is weir's to write while a job runs: open it read-only "
                             "(duckdb -readonly, read_only=True), or close the process that wrote to it",
                    ) from None
                time.sleep(RETRY_PAUSE_SECONDS)

    def publish(self) -> None:
        """Step 4: the pending copy becomes the published file; nothing pending: nothing happens."""
        with self._lock:
            if self._connection is None:
                return
            started = time.perf_counter()
            connection, self._connection = self._connection, None
            after, self._after, self._waiting = self._after, [], {}
            try:
                connection.execute("CHECKPOINT")
                connection.close()
                with open(self._next, "rb+") as file:
                    os.fsync(file.fileno())
                faults.reach("publish")
                os.replace(self._next, self.path)
                folder = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
                try:
                    os.fsync(folder)
                finally:
                    os.close(folder)
            finally:
                self._release()
            self.published += 1
            self.last_publish_seconds = time.perf_counter() - started
            faults.reach("published")
            for step in after:
                step()

    def discard(self) -> None:
        """Drop the pending copy unpublished (its writers' staged files stay for recovery)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
                self._release()
            self._after, self._waiting = [], {}

    def _release(self) -> None:
        if self._next is not None and os.path.exists(self._next):
            os.remove(self._next)
        if self._next is not None and os.path.exists(f"{self._next}.wal"):
            os.remove(f"{self._next}.wal")
        self._next = None
        if self._lock_file is not None:
            os.close(self._lock_file)  # closing the descriptor releases the flock
            self._lock_file = None


def open_snapshot(path: str, connection: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """A read-only connection on the latest published snapshot of the database at ``path``.

    It sees that one snapshot for as long as it is open (a consistent committed checkpoint of
    every table), never delays a writer, and any number can be open in any processes. It is a
    fresh in-memory DuckDB with the snapshot ATTACHed read-only and made the default catalog
    (USE). Attached through a hard link made for the purpose (and unlinked at once, the open
    file keeping the snapshot), not the path itself: ``duckdb.connect(path)`` hands back an
    instance this process already has open on the path (an older snapshot), and DuckDB refuses
    one process both a read-write connection on a path (a notebook's) and an ATTACH of it.
    ``connection``: a fresh in-memory DuckDB made beforehand to use (making one costs ~30 ms)."""
    connection = connection if connection is not None else duckdb.connect(":memory:")
    try:
        for attempt in range(3):
            link = f"{path}.weir-reader-{uuid.uuid4().hex[:12]}"
            try:
                os.link(path, link)
            except FileNotFoundError:
                link = path  # no database: ATTACH says so
            except OSError:  # no hard links here (another filesystem's rules): the path itself
                link = path
            try:
                quoted = link.replace("'", "''")
                connection.execute(f"ATTACH '{quoted}' AS \"{catalog_name(path)}\" (READ_ONLY)")
                break
            except duckdb.IOException:
                if link == path or attempt == 2:
                    raise
                # a writer cleared the link as stale before it was attached: link again
            finally:
                if link != path and os.path.lexists(link):
                    os.unlink(link)
        connection.execute(f"USE \"{catalog_name(path)}\"")
    except BaseException:
        connection.close()
        raise
    return connection


def catalog_name(path: str) -> str:
    """The name ``open_snapshot`` gives the database: its file's stem, as the DuckDB CLI names it
    (``weir`` for weir.duckdb), or ``results`` when the stem is no plain name."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return stem if stem.isidentifier() and stem.lower() not in _RESERVED else "results"


_RESERVED = {"memory", "system", "temp", "main"}

_PUBLISHERS: dict[str, SnapshotPublisher] = {}
_PUBLISHERS_LOCK = threading.Lock()


def publisher_for(path: str) -> SnapshotPublisher:
    """The one publisher of ``path`` in this process (every sink and the shell share it)."""
    key = os.path.realpath(path)
    with _PUBLISHERS_LOCK:
        if key not in _PUBLISHERS:
            _PUBLISHERS[key] = SnapshotPublisher(key)
        return _PUBLISHERS[key]

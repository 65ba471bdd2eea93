"""The ``duckdb`` sink: rows into a table of a DuckDB database file, exactly once.

DuckDB allows one writing process per file, and other processes (the shell,
a notebook, the DuckDB CLI) want to query the results while the job runs, for
as long as they like. So the sink never writes the published file: each
change goes into a new snapshot of it (``duckdb_snapshot.py``):

1. ``open()`` creates the table from the schema if the published snapshot
   lacks it (a snapshot of its own). With 'sink.mode' = 'replace' the old table is dropped and
   recreated inside the first commit's transaction, so a job that fails
   before committing leaves the previous result in place.
2. ``write`` stages batches in memory, and past ``STAGE_IN_MEMORY_BYTES`` on
   to an in-progress parquet file in the staging folder (bounded memory
   however much a checkpoint's output is).
3. ``pre_commit(checkpoint_id)`` writes the staged rows to a parquet staging
   file beside the database (``<database>.staging/``), fsyncs it, and returns
   its path: durable and invisible.
4. ``commit(checkpoint_id, handle)``, in ONE transaction, inserts every staged
   file not yet inserted and records it in ``_weir_sink_commits``, in the next
   snapshot of the database (``duckdb_snapshot.py``: a copy of the published
   file, renamed over it once every sink of the job on this database has
   committed the checkpoint). Once published, the staging files are deleted
   (a table without a key keeps those of its latest ``KEEP_COMMITTED``
   checkpoints in ``<database>.weir-log/``, to take their rows back). The
   record makes a repeated commit (after a restore) a no-op, and is the
   table's commit log: job, checkpoint and change of row count, written in the
   transaction that changes the table, read by ``withdraw``.
5. ``finish()`` commits what is pre-committed and what is still in memory;
   ``abort()`` drops what is in memory (pre-committed files are ``recover``'s).

With 'sink.upsert-key' (the planner sets it from the table's PRIMARY KEY or the
materialized view's grouping key) the table is maintained by upsert: the staged
changes of a commit (rows with ``_row_kind``, or inserts) are applied in order
in the same transaction — per key the last change wins: +I/+U replace the row
with that key, -U/-D delete it — by one DELETE of the changed keys and one
INSERT of the rows that remain. So the table always holds the result as of the
last completed checkpoint. An updating query without a key (a join of updating
or outer inputs) keeps its table as a multiset instead: each commit adds or
deletes, per distinct row, its inserts minus its retractions.

The sink never opens the published file for writing, so readers (any
number, in any process, held open for any time) never delay or fail a commit;
only another writer's publish can make a commit wait ('sink.lock-timeout').
"""
from __future__ import annotations

import json
import os
import re
import uuid
import weakref
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from weir.engine.changelog import INSERT, ROW_KIND, UPDATE_AFTER
from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Sink, option_value
from weir.engine.connectors.duckdb_snapshot import open_snapshot, publisher_for
from weir.engine.connectors.options import parse_duration_seconds
from weir.engine.errors import EngineError

COMMITS_TABLE = "_weir_sink_commits"
#: How many of its latest checkpoints' rows a keyless table keeps the staged files of, to take
#: them back when a run resumes from an earlier checkpoint (more than the 3 retained by default).
KEEP_COMMITTED = 8
#: Rows staged for the next commit are kept in memory up to this many bytes, then written on to
#: a staging file as they come (the output between two checkpoints can be larger than memory).
STAGE_IN_MEMORY_BYTES = 16 << 20
#: The checkpoint id under which ``finish`` stages what is left.
FINAL = 2**62


class DuckDBTableSink(Sink):
    transactional = True
    global_commit = True

    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        self.database = options["path"]
        self.table_name = options["table-name"]
        self.mode = option_value(options, SPEC, "sink.mode")
        self.lock_timeout = parse_duration_seconds(
            "sink.lock-timeout", option_value(options, SPEC, "sink.lock-timeout")
        )
        self.staging_dir = f"{self.database}.staging"
        #: The staged files of a keyless table's latest commits, kept after they were applied.
        self.kept_dir = f"{self.database}.weir-log"
        self._run = uuid.uuid4().hex[:12]
        self._staged: list[pa.RecordBatch] = []
        self._staged_bytes = 0
        #: Past ``STAGE_IN_MEMORY_BYTES`` the staged rows go on to a Parquet file (its writer and
        #: in-progress path), so that the rows between two checkpoints never pile up in memory.
        self._stage_file: tuple[pq.ParquetWriter, str] | None = None
        self._pre_committed: dict[int, list[str]] = {}
        self._replace_pending = self.mode == "replace"
        key = option_value(options, SPEC, "sink.upsert-key")
        self.upsert_key: list[str] | None = json.loads(key) if key is not None else None
        #: The table's columns: the sink's schema without the row kind.
        self.table_schema = pa.schema([f for f in schema if f.name != ROW_KIND])
        #: The job whose commits ``_weir_sink_commits`` records (set by the executor).
        self.job = "job"
        #: In a parallel job's worker: the coordinator commits (Flink's global committer).
        self.committed_elsewhere = False
        #: This sink in the group of its job's sinks on the database (``SnapshotPublisher.join``).
        self._member: str | None = None

    # -- lifecycle ---------------------------------------------------------

    def open(self, resuming: bool = False) -> None:
        if resuming:
            self._replace_pending = False  # the table holds output committed before the restore
        os.makedirs(os.path.dirname(os.path.abspath(self.database)), exist_ok=True)
        os.makedirs(self.staging_dir, exist_ok=True)
        if self.committed_elsewhere:
            return  # a parallel worker only stages: the coordinator, which commits, made the table
        if self._member is None:  # one of its job's group of sinks on this database; it leaves
            self._member = f"{self.table_name}~{self._run}"  # at its end, or when dropped unended
            self.publisher.join(self.job, self._member)
            weakref.finalize(self, self.publisher.leave, self.job, self._member)
        if not self._table_exists():
            with self.publisher.change(self.lock_timeout) as connection:
                self._create_table(connection)

    @property
    def publisher(self):
        return publisher_for(self.database)

    def _table_exists(self) -> bool:
        """Whether the published snapshot has the table (read without the publish lock)."""
        if not os.path.exists(self.database):
            return False
        schema, _, name = self.table_name.rpartition(".")
        with open_snapshot(self.database) as connection:
            return bool(connection.execute(
                "SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() AND table_name = ? "
                "AND schema_name = coalesce(nullif(?, ''), 'main')", [name, schema]).fetchall())

    def _create_table(self, connection: duckdb.DuckDBPyConnection) -> None:
        # From a Parquet file rather than a registered Arrow table: a Python object
        # scan on a database this process also queries from other threads fails at times.
        os.makedirs(self.staging_dir, exist_ok=True)
        schema_file = os.path.join(self.staging_dir, f".{_safe(self.table_name)}~{self._run}.schema.parquet")
        pq.write_table(self.table_schema.empty_table(), schema_file)
        try:
            connection.execute(f"CREATE TABLE IF NOT EXISTS {self._quoted_table} AS "
                               "SELECT * FROM read_parquet(?) LIMIT 0", [schema_file])
        finally:
            os.remove(schema_file)

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self._staged.append(batch)
            self._staged_bytes += batch.nbytes
            if self._staged_bytes > STAGE_IN_MEMORY_BYTES:
                self._write_staged()

    def _write_staged(self) -> None:
        """The rows staged in memory on to the in-progress staging file."""
        if self._stage_file is None:
            os.makedirs(self.staging_dir, exist_ok=True)
            path = os.path.join(self.staging_dir, f"{_safe(self.table_name)}~{self.subtask_index}-{self._run}"
                                                  f"-{uuid.uuid4().hex[:8]}.inprogress")
            self._stage_file = (pq.ParquetWriter(path, self.schema), path)
        for batch in self._staged:
            self._stage_file[0].write_batch(batch)
        self._staged, self._staged_bytes = [], 0

    def _drop_stage_file(self) -> None:
        if self._stage_file is not None:
            writer, path = self._stage_file
            self._stage_file = None
            writer.close()
            if os.path.exists(path):
                os.remove(path)

    def pre_commit(self, checkpoint_id: int) -> list[str]:
        files = [self._stage_to_file(checkpoint_id)] if self._staged or self._stage_file else []
        self._pre_committed[checkpoint_id] = files
        return files

    def commit(self, checkpoint_id: int, handle: Any = None) -> None:
        done = [cid for cid in sorted(self._pre_committed) if cid <= checkpoint_id]
        if self.committed_elsewhere:  # the parallel coordinator committed the staged files, once
            for cid in done:
                del self._pre_committed[cid]
            return
        files = [f for cid in done for f in self._pre_committed[cid]]
        files += [f for f in handle or [] if f not in files]
        self._insert(files, checkpoint_id)  # may fail: then the files stay pre-committed
        for cid in done:
            del self._pre_committed[cid]

    def finish(self) -> None:
        if self._staged or self._stage_file:
            self.pre_commit(FINAL)
        files = [f for cid in sorted(self._pre_committed) for f in self._pre_committed[cid]]
        self._insert(files)  # may fail: then everything stays pre-committed
        self._pre_committed = {}
        self.publisher.leave(self.job, self._member)

    def recover(self, handles: list[Any], checkpoint_id: int | None = None) -> None:
        """Insert the restored checkpoint's staged files (once each); delete other staged files."""
        files = [path for handle in handles for path in handle or []]
        pending, self._replace_pending = self._replace_pending, False  # republish: never replace
        self._insert(files)
        self._replace_pending = pending
        prefix = f"{_safe(self.table_name)}~"
        if os.path.isdir(self.staging_dir):
            for name in os.listdir(self.staging_dir):
                if name.startswith(prefix) and os.path.join(self.staging_dir, name) not in files:
                    os.remove(os.path.join(self.staging_dir, name))

    def abort(self) -> None:
        """Drop the rows staged since the last pre-commit. Pre-committed files stay:
        they may belong to a checkpoint that completed, and ``recover`` decides."""
        self._staged, self._staged_bytes = [], 0
        self._drop_stage_file()
        self._pre_committed = {}
        if not self.committed_elsewhere:
            self.publisher.leave(self.job, self._member)  # what its group waited for goes out

    # -- the parts ---------------------------------------------------------

    @property
    def _quoted_table(self) -> str:
        return ".".join('"' + part.replace('"', '""') + '"' for part in self.table_name.split("."))

    def _stage_to_file(self, checkpoint_id: int) -> str:
        name = f"{_safe(self.table_name)}~{self.subtask_index}-{self._run}-{checkpoint_id}.parquet"
        path = os.path.join(self.staging_dir, name)
        if self._stage_file is not None:  # the rows went on to a file as they came: finish it
            self._write_staged()
            writer, written = self._stage_file
            self._stage_file = None
            writer.close()
            with open(written, "rb+") as file:
                os.fsync(file.fileno())
            os.replace(written, path)
            return path
        with open(path, "wb") as file:
            pq.write_table(pa.Table.from_batches(self._staged, schema=self.schema), file)
            file.flush()
            os.fsync(file.fileno())
        self._staged, self._staged_bytes = [], 0
        return path

    def _insert(self, files: list[str], checkpoint_id: int | None = None) -> None:
        """Insert staged files, once each, in one transaction, and record each in
        ``_weir_sink_commits`` with its job, checkpoint and the change in the table's row count:
        the table's commit log, updated in the transaction that changes the table. With a
        ``checkpoint_id`` the transaction joins its job's snapshot of that checkpoint; without,
        it is published at once. The staged files go once it is published."""
        publisher = self.publisher
        if self._member is None:
            checkpoint_id = None  # not opened, so in no group: published at once
        if not files and not self._replace_pending:
            if checkpoint_id is not None:  # the group learns that this sink has reached it
                publisher.commit(self.job, self._member, checkpoint_id, None, None, timeout=self.lock_timeout)
            return
        applied: dict[str, Any] = {}

        def apply(connection: duckdb.DuckDBPyConnection) -> None:
            connection.execute("BEGIN TRANSACTION")
            try:
                applied["todo"], applied["replaced"] = self._apply(connection, files), self._replace_pending
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            self._replace_pending = False

        def after() -> None:
            self._after_publish(files, applied["todo"], applied["replaced"])

        if checkpoint_id is None:
            with publisher.change(self.lock_timeout, after) as connection:
                apply(connection)
        else:
            publisher.commit(self.job, self._member, checkpoint_id, apply, after, timeout=self.lock_timeout)

    def _apply(self, connection: duckdb.DuckDBPyConnection, files: list[str]) -> list[str]:
        """The commit's transaction: the staged files not yet recorded, applied and recorded."""
        _ensure_commits_table(connection)
        if self._replace_pending:
            connection.execute(f"DROP TABLE IF EXISTS {self._quoted_table}")
            connection.execute(f"DELETE FROM {COMMITS_TABLE} WHERE table_name = ?", [self.table_name])
            self._create_table(connection)
        done = {row[0] for row in connection.execute(
            f"SELECT staged FROM {COMMITS_TABLE} WHERE table_name = ?", [self.table_name]
        ).fetchall()}
        todo = sorted((f for f in files if f not in done and os.path.exists(f)), key=_checkpoint_of)
        before = self._count(connection) if todo else 0
        if todo and self.upsert_key is not None:
            self._upsert(connection, todo)
        elif todo and ROW_KIND in self.schema.names:
            self._retract(connection, todo)
        elif todo:
            connection.execute(
                f"INSERT INTO {self._quoted_table} BY NAME SELECT * FROM read_parquet(?)", [todo]
            )
        if todo:
            delta = self._count(connection) - before
            connection.executemany(
                f"INSERT INTO {COMMITS_TABLE} VALUES (?, ?, ?, ?, ?, ?)",
                [[self.table_name, f, self.subtask_index, self.job, _checkpoint_of(f),
                  delta if i == len(todo) - 1 else 0] for i, f in enumerate(todo)],
            )
        return todo

    def _after_publish(self, files: list[str], todo: list[str], replaced: bool) -> None:
        """The published snapshot holds the staged files' rows: delete them (a keyless table
        keeps its latest ones, to take them back)."""
        if replaced:
            self._forget_kept(lambda checkpoint_id: True)
        keep = self.upsert_key is None  # what a keyless table got, kept to take it back (``withdraw``)
        for path in files:
            if keep and path in todo and os.path.exists(path):
                os.makedirs(self.kept_dir, exist_ok=True)
                os.replace(path, self._kept(path))
            elif os.path.exists(path):
                os.remove(path)
        if keep and todo:
            newest = sorted({_checkpoint_of(f) for f in self._kept_files()}, reverse=True)[:KEEP_COMMITTED]
            self._forget_kept(lambda checkpoint_id: checkpoint_id not in newest)

    def _kept(self, staged: str) -> str:
        return os.path.join(self.kept_dir, os.path.basename(staged))

    def _kept_files(self) -> list[str]:
        prefix = f"{_safe(self.table_name)}~"
        if not os.path.isdir(self.kept_dir):
            return []
        return [os.path.join(self.kept_dir, n) for n in os.listdir(self.kept_dir) if n.startswith(prefix)]

    def _forget_kept(self, doomed) -> None:
        for path in self._kept_files():
            if doomed(_checkpoint_of(path)):
                os.remove(path)

    def _count(self, connection: duckdb.DuckDBPyConnection) -> int:
        return connection.execute(f"SELECT count(*) FROM {self._quoted_table}").fetchone()[0]

    def withdraw(self, job: str, after: int, *, fresh: bool = False) -> str | None:
        """Output ``job`` committed to this table for checkpoints after ``after``, which a run
        restored from ``after`` would commit again.

        A table kept by upsert key replays idempotently (each key ends with its last change),
        and a 'replace' table started afresh is replaced by its first commit: their records go.
        A keyless table undoes those commits from the staged files it kept, in one transaction
        with their records. Where the files are gone its rows cannot be told from others: the
        run is refused, unless ``fresh`` and every row of the table is one ``job`` committed —
        then the table is emptied."""
        if not os.path.exists(self.database):
            return None
        with open_snapshot(self.database) as snapshot:  # mostly nothing to withdraw: no copy then
            if not _has_commits_table(snapshot) or not snapshot.execute(
                    f"SELECT 1 FROM {COMMITS_TABLE} WHERE table_name = ? AND job = ? AND checkpoint_id > ? "
                    "LIMIT 1", [self.table_name, job, after]).fetchall():
                return None
        cleanup: list = []
        with self.publisher.change(self.lock_timeout, lambda: [step() for step in cleanup]) as connection:
            return self._withdraw(connection, job, after, fresh, cleanup)

    def _withdraw(self, connection: duckdb.DuckDBPyConnection, job: str, after: int, fresh: bool,
                  cleanup: list) -> str | None:
        """``withdraw`` in the next snapshot; what to delete once it is published goes to ``cleanup``."""
        later = connection.execute(
            f"SELECT DISTINCT checkpoint_id FROM {COMMITS_TABLE} WHERE table_name = ? AND job = ? "
            "AND checkpoint_id > ? ORDER BY 1", [self.table_name, job, after]).fetchall()
        if not later:
            return None
        ids = {row[0] for row in later}
        if self.upsert_key is not None or (after == 0 and self.mode == "replace"):
            connection.execute(f"DELETE FROM {COMMITS_TABLE} WHERE table_name = ? AND job = ? "
                               "AND checkpoint_id > ?", [self.table_name, job, after])
            return None
        where = f"table '{self.table_name}' in {self.database}"
        staged = [row[0] for row in connection.execute(
            f"SELECT staged FROM {COMMITS_TABLE} WHERE table_name = ? AND job = ? AND checkpoint_id > ?",
            [self.table_name, job, after]).fetchall()]
        kept = [self._kept(f) for f in staged]
        if not fresh and all(os.path.exists(f) for f in kept):
            before = self._count(connection)
            connection.execute("BEGIN TRANSACTION")
            self._retract(connection, kept, undo=True)
            connection.execute(f"DELETE FROM {COMMITS_TABLE} WHERE table_name = ? AND job = ? "
                               "AND checkpoint_id > ?", [self.table_name, job, after])
            connection.execute("COMMIT")
            taken = before - self._count(connection)
            cleanup.extend(lambda path=path: os.path.exists(path) and os.remove(path) for path in kept)
            return (f"withdrew {taken:,} row{'s' if taken != 1 else ''} from {where} that "
                    f"{checkpoints_text(ids)} had committed")
        if not fresh:
            raise EngineError(
                f"{where} holds rows that {checkpoints_text(ids)} of job {job} committed, after "
                f"{'the start' if after == 0 else f'checkpoint {after}'} this run resumes from; "
                "rows cannot be taken back out of an append-only table, and replaying would write "
                "them twice",
                hint="start the job over with --fresh (it removes the job's rows from the table "
                     "and recomputes them), or restore the lost checkpoint files",
            )
        ours = connection.execute(f"SELECT coalesce(sum(row_delta), 0) FROM {COMMITS_TABLE} "
                                  "WHERE table_name = ? AND job = ?", [self.table_name, job]).fetchone()[0]
        present = self._count(connection)
        if ours != present:
            raise EngineError(
                f"--fresh cannot withdraw job {job}'s rows from {where}: the table holds {present:,} "
                f"rows and the job committed {ours:,} of them",
                hint="other writers added rows; remove the job's rows yourself (or drop the table), "
                     "then run with --fresh",
            )
        connection.execute("BEGIN TRANSACTION")
        connection.execute(f"DELETE FROM {self._quoted_table}")
        connection.execute(f"DELETE FROM {COMMITS_TABLE} WHERE table_name = ? AND job = ?",
                           [self.table_name, job])
        connection.execute("COMMIT")
        cleanup.append(lambda: self._forget_kept(lambda checkpoint_id: True))
        return f"withdrew job {job}'s {present:,} rows from {where}"

    def _upsert(self, connection: duckdb.DuckDBPyConnection, files: list[str]) -> None:
        """Apply the changes in ``files`` (in checkpoint order, rows in order) by key."""
        keys = [_quote(k) for k in self.upsert_key]
        kind = _quote(ROW_KIND) if ROW_KIND in self.schema.names else str(INSERT)
        columns = ", ".join(_quote(n) for n in self.table_schema.names)
        order = "list_position(?, __weir_file) DESC, file_row_number DESC"
        partition = f"PARTITION BY {', '.join(keys)} " if keys else ""
        connection.execute(
            f"CREATE OR REPLACE TEMP TABLE __weir_last AS SELECT {columns}, {kind} AS __weir_kind "
            f"FROM read_parquet(?, filename = '__weir_file', file_row_number = true) "
            f"QUALIFY row_number() OVER ({partition}ORDER BY {order}) = 1", [files, files])
        if keys:
            match = " AND ".join(f"t.{k} IS NOT DISTINCT FROM d.{k}" for k in keys)
            connection.execute(f"DELETE FROM {self._quoted_table} AS t USING __weir_last AS d WHERE {match}")
        else:  # one row at most (a global aggregate): any change replaces it
            connection.execute(f"DELETE FROM {self._quoted_table}")
        connection.execute(f"INSERT INTO {self._quoted_table} BY NAME SELECT {columns} FROM __weir_last "
                           f"WHERE __weir_kind IN ({INSERT}, {UPDATE_AFTER})")
        connection.execute("DROP TABLE __weir_last")

    def _retract(self, connection: duckdb.DuckDBPyConnection, files: list[str], *, undo: bool = False) -> None:
        """Apply the changes in ``files`` to a table without a key, as a multiset: per distinct
        row, the inserts (+I, +U; every row of an append-only file) minus the retractions
        (-U, -D) are added or deleted. ``undo``: take the changes back instead."""
        names = [_quote(n) for n in self.table_schema.names]
        columns = ", ".join(names)
        kind = _quote(ROW_KIND) if ROW_KIND in self.schema.names else str(INSERT)
        sign = -1 if undo else 1
        connection.execute(
            f"CREATE OR REPLACE TEMP TABLE __weir_net AS SELECT {columns}, "
            f"sum(CASE WHEN {kind} IN ({INSERT}, {UPDATE_AFTER}) THEN {sign} ELSE {-sign} END)::BIGINT AS __weir_n "
            f"FROM read_parquet(?) GROUP BY ALL HAVING __weir_n <> 0", [files])
        same = " AND ".join(f"t.{n} IS NOT DISTINCT FROM d.{n}" for n in names)
        connection.execute(
            f"DELETE FROM {self._quoted_table} WHERE rowid IN (SELECT t.rowid FROM "
            f"(SELECT rowid, *, row_number() OVER (PARTITION BY {columns} ORDER BY rowid) AS __weir_i "
            f"FROM {self._quoted_table}) t JOIN __weir_net d ON {same} AND t.__weir_i <= -d.__weir_n)")
        connection.execute(f"INSERT INTO {self._quoted_table} BY NAME SELECT {columns} FROM "
                           f"(SELECT *, unnest(range(__weir_n)) FROM __weir_net WHERE __weir_n > 0)")
        connection.execute("DROP TABLE __weir_net")

def _ensure_commits_table(connection: duckdb.DuckDBPyConnection) -> None:
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {COMMITS_TABLE} "
        "(table_name VARCHAR, staged VARCHAR, subtask INTEGER)"
    )
    for column, kind in (("job", "VARCHAR"), ("checkpoint_id", "BIGINT"), ("row_delta", "BIGINT")):
        connection.execute(f"ALTER TABLE {COMMITS_TABLE} ADD COLUMN IF NOT EXISTS {column} {kind}")


def _has_commits_table(connection: duckdb.DuckDBPyConnection) -> bool:
    return bool(connection.execute(
        "SELECT 1 FROM duckdb_tables() WHERE database_name = current_database() AND table_name = ?",
        [COMMITS_TABLE]).fetchall())


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_CHECKPOINT = re.compile(r"-(\d+)\.parquet$")


def _checkpoint_of(path: str) -> int:
    """The checkpoint a staged file belongs to (its name ends with it): changes apply in that order."""
    found = _CHECKPOINT.search(path)
    return int(found.group(1)) if found else 0


def checkpoints_text(ids: set[int]) -> str:
    """'checkpoint 5', 'checkpoints 5, 6 and the final one' (a parallel job's final one has no number)."""
    final = any(i >= FINAL for i in ids)
    numbers = sorted(i for i in ids if i < FINAL)
    parts = [str(i) for i in numbers] + (["the final one"] if final else [])
    if len(parts) == 1:
        return f"checkpoint {parts[0]}" if numbers else "the final checkpoint"
    return "checkpoints " + ", ".join(parts[:-1]) + " and " + parts[-1]


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


SPEC = ConnectorSpec(
    name="duckdb",
    source=None,
    sink=DuckDBTableSink,
    options={
        "path": OptionSpec("the DuckDB database file", required=True),
        "table-name": OptionSpec("the table to write, created from the schema if missing", required=True),
        "sink.mode": OptionSpec(
            "'append' to the table, or 'replace' it with the job's output at its first commit",
            default="append",
            choices=("append", "replace"),
        ),
        "sink.upsert-key": OptionSpec(
            "the key columns (a JSON list) by which the table is maintained by upsert; set by the planner "
            "from the table's PRIMARY KEY ... NOT ENFORCED or a materialized view's grouping key"),
        "sink.lock-timeout": OptionSpec(
            "how long a commit waits for another writer's publish to the same database (readers never "
            "make it wait)",
            default="30s",
            value_type="duration",
        ),
    },
)

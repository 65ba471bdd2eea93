"""The ``filesystem`` sink: part files published by atomic rename at commit.

The protocol, per subtask:

1. ``write`` appends to an in-progress file, hidden by its name
   ``.part-<subtask>-<n>.<ext>.inprogress``; past 'sink.rolling-policy.file-size'
   bytes the file is closed and a new one started.
2. ``pre_commit(checkpoint_id)`` closes the current file (flush, fsync) and
   returns the handle: the [in-progress name, final name] pairs of every file
   closed since the last pre-commit. The files are durable and invisible.
3. ``commit(checkpoint_id, handle)`` renames each in-progress file to its
   final name ``part-<subtask>-<n>.<ext>`` and fsyncs the directory. It is
   idempotent, so a restored job can commit a handle from its checkpoint again.
4. ``abort()`` deletes the in-progress files written since the last
   pre-commit (pre-committed ones are ``recover``'s to publish or delete);
   ``finish()`` closes and commits everything.

Part numbers continue after the highest number found in the directory (final
or in-progress), so a restarted job never overwrites earlier output. Readers
(DuckDB's ``read_csv('dir/*.csv')``, pandas) see only published files.

The commit log ``_weir_log/<job>.<subtask>.jsonl`` beside the output records
what each checkpoint published, one JSON line ``{"checkpoint": n, "files":
[...]}`` appended and fsynced before the files are renamed. It lives with the
output, so losing checkpoint files cannot erase it: a job restored from
checkpoint k (or started afresh, k = 0) deletes the files that checkpoints
after k published (``withdraw``), and replaying writes them once again.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, BinaryIO

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from weir.engine.connectors.base import Sink
from weir.engine.connectors.duckdb_table import checkpoints_text
from weir.engine.connectors.options import parse_size
from weir.engine.connectors.text_format import debezium_envelope, timestamps_as_text

from weir.engine.checkpoint.files import fsync_directory, write_atomically

EXTENSION = {"csv": "csv", "json": "json", "parquet": "parquet", "debezium-json": "json"}
IN_PROGRESS_SUFFIX = ".inprogress"
#: The commit log's folder inside the sink directory (hidden from readers by its '_').
LOG_DIRECTORY = "_weir_log"


class PartWriter:
    """One open part file of a format."""

    def __init__(self, file: BinaryIO, schema: pa.Schema):
        self.file = file
        self.schema = schema
        self.bytes_written = 0

    def write(self, batch: pa.RecordBatch) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Flush, fsync and close the file."""
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()


class CsvPartWriter(PartWriter):
    def __init__(self, file: BinaryIO, schema: pa.Schema):
        super().__init__(file, schema)
        self.writer: pa_csv.CSVWriter | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        batch = timestamps_as_text(batch, " ")
        if self.writer is None:
            self.writer = pa_csv.CSVWriter(self.file, batch.schema)
        self.writer.write_batch(batch)
        self.bytes_written = self.file.tell()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        super().close()


class JsonPartWriter(PartWriter):
    """JSON lines, rendered by DuckDB's ``to_json``; timestamps as text, in the
    form of Flink's default 'SQL' timestamp format: '2024-01-01 00:00:10.500'."""

    def __init__(self, file: BinaryIO, schema: pa.Schema):
        super().__init__(file, schema)
        self.connection = duckdb.connect(":memory:")

    def write(self, batch: pa.RecordBatch) -> None:
        self._write_lines(batch, "SELECT to_json(r) AS line FROM rows AS r")

    def _write_lines(self, batch: pa.RecordBatch, query: str) -> None:
        self.connection.register("rows", timestamps_as_text(batch, " "))
        try:
            lines = self.connection.sql(query).to_arrow_table()
        finally:
            self.connection.unregister("rows")
        line = lines.column("line").combine_chunks()
        # typed scalars: an untyped one makes pyarrow import pandas (engine/pandas_import.py)
        text = pc.binary_join_element_wise(line, pa.scalar("", line.type), pa.scalar("\n", line.type))
        data = _string_bytes(text)
        self.file.write(data)
        self.bytes_written += len(data)

    def close(self) -> None:
        self.connection.close()
        super().close()


class DebeziumJsonPartWriter(JsonPartWriter):
    """Each change as a Debezium envelope on a line, as Flink's 'debezium-json' format
    writes it: +I and +U as ``{"before": null, "after": {...}, "op": "c"}``, -U and -D as
    ``{"before": {...}, "after": null, "op": "d"}``. Rows without a row kind are inserts."""

    def write(self, batch: pa.RecordBatch) -> None:
        envelope = debezium_envelope(batch.schema.names)
        self._write_lines(batch, f"SELECT CAST({envelope} AS VARCHAR) AS line FROM rows AS r")


def _string_bytes(text: pa.StringArray) -> bytes:
    """The characters of a string array, concatenated (a slice of its data buffer)."""
    if len(text) == 0:
        return b""
    offsets = pa.Array.from_buffers(pa.int32(), len(text) + 1, [None, text.buffers()[1]], offset=text.offset)
    first, last = offsets[0].as_py(), offsets[len(text)].as_py()
    return text.buffers()[2][first:last].to_pybytes()


class ParquetPartWriter(PartWriter):
    def __init__(self, file: BinaryIO, schema: pa.Schema):
        super().__init__(file, schema)
        self.writer = pq.ParquetWriter(file, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.bytes_written += batch.nbytes

    def close(self) -> None:
        self.writer.close()
        super().close()


WRITERS = {"csv": CsvPartWriter, "json": JsonPartWriter, "parquet": ParquetPartWriter,
           "debezium-json": DebeziumJsonPartWriter}


class FileSystemSink(Sink):
    transactional = True

    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        self.directory = options["path"]
        self.format = options["format"]
        self.extension = EXTENSION[self.format]
        self.rolling_bytes = parse_size(
            "sink.rolling-policy.file-size", options.get("sink.rolling-policy.file-size", "128MB")
        )
        self._writer: PartWriter | None = None
        self._current: list[str] | None = None  # [in-progress name, final name]
        self._closed: list[list[str]] = []  # closed, not yet pre-committed
        self._pre_committed: dict[int, list[list[str]]] = {}
        self._next_part = 0
        #: The job whose commits the log records (set by the executor).
        self.job = "job"

    def open(self, resuming: bool = False) -> None:
        os.makedirs(self.directory, exist_ok=True)
        pattern = re.compile(rf"^\.?part-{self.subtask_index}-(\d+)\.")
        numbers = [int(m.group(1)) for m in map(pattern.match, os.listdir(self.directory)) if m]
        self._next_part = max(numbers, default=-1) + 1

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self._writer is None:
            self._start_part()
        self._writer.write(batch)
        if self._writer.bytes_written >= self.rolling_bytes:
            self._close_part()

    def pre_commit(self, checkpoint_id: int) -> list[list[str]]:
        self._close_part()
        handle, self._closed = self._closed, []
        self._pre_committed[checkpoint_id] = handle
        return handle

    def commit(self, checkpoint_id: int, handle: Any = None) -> None:
        """Publish ``handle``'s files, and any pre-committed at or before ``checkpoint_id``."""
        files = [pair for cid in sorted(self._pre_committed) if cid <= checkpoint_id
                 for pair in self._pre_committed.pop(cid)]
        for pair in handle or []:
            if list(pair) not in files:
                files.append(list(pair))
        self._log(checkpoint_id, files)
        self._publish(files)

    def abort(self) -> None:
        """Delete what was written since the last pre-commit. Pre-committed files stay:
        they may belong to a checkpoint that completed, and ``recover`` decides."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        doomed = ([self._current] if self._current else []) + self._closed
        for in_progress, _ in doomed:
            path = os.path.join(self.directory, in_progress)
            if os.path.exists(path):
                os.remove(path)
        self._current, self._closed, self._pre_committed = None, [], {}

    def recover(self, handles: list[Any], checkpoint_id: int | None = None) -> None:
        """Publish the restored checkpoint's files (logged under ``checkpoint_id``, if given);
        delete every other in-progress file."""
        os.makedirs(self.directory, exist_ok=True)
        keep = [list(pair) for handle in handles for pair in handle or []]
        if checkpoint_id is not None:
            self._log(checkpoint_id, keep)
        self._publish(keep)
        for name in os.listdir(self.directory):
            if name.startswith(".part-") and name.endswith(IN_PROGRESS_SUFFIX):
                os.remove(os.path.join(self.directory, name))

    def withdraw(self, job: str, after: int, *, fresh: bool = False) -> str | None:
        """Delete the files that ``job``'s checkpoints after ``after`` published (its commit
        log says which), and their log lines; say what was withdrawn, or None."""
        folder = os.path.join(self.directory, LOG_DIRECTORY)
        if not os.path.isdir(folder):
            return None
        removed, checkpoints = 0, set()
        for name in sorted(os.listdir(folder)):
            if not (name.startswith(f"{job}.") and name.endswith(".jsonl")):
                continue
            path = os.path.join(folder, name)
            entries = _read_log(path)
            kept = [e for e in entries if e["checkpoint"] <= after]
            for entry in entries:
                if entry["checkpoint"] > after:
                    checkpoints.add(entry["checkpoint"])
                    for final in entry["files"]:
                        for doomed in (final, f".{final}{IN_PROGRESS_SUFFIX}"):
                            if os.path.exists(os.path.join(self.directory, doomed)):
                                os.remove(os.path.join(self.directory, doomed))
                                removed += doomed == final
            if len(kept) != len(entries):
                write_atomically(Path(path), "".join(json.dumps(e) + "\n" for e in kept).encode())
        if not checkpoints:
            return None
        fsync_directory(Path(self.directory))
        return (f"withdrew {removed} part file{'s' if removed != 1 else ''} from {self.directory} that "
                f"{checkpoints_text(checkpoints)} had published")

    def finish(self) -> None:
        self._close_part()
        files = [pair for cid in sorted(self._pre_committed) for pair in self._pre_committed[cid]]
        self._pre_committed = {}
        files += self._closed
        self._closed = []
        self._publish(files)

    def _start_part(self) -> None:
        final = f"part-{self.subtask_index}-{self._next_part}.{self.extension}"
        self._next_part += 1
        self._current = [f".{final}{IN_PROGRESS_SUFFIX}", final]
        file = open(os.path.join(self.directory, self._current[0]), "wb")
        self._writer = WRITERS[self.format](file, self.schema)

    def _close_part(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._closed.append(self._current)
        self._writer, self._current = None, None

    def _log(self, checkpoint_id: int, files: list[list[str]]) -> None:
        """Record, durably and before they become visible, the files checkpoint ``checkpoint_id``
        publishes. A line torn by a crash is followed by a newline and skipped by readers: its
        files were never renamed."""
        pending = [final for in_progress, final in files
                   if os.path.exists(os.path.join(self.directory, in_progress))]
        if not pending:
            return
        folder = os.path.join(self.directory, LOG_DIRECTORY)
        if not os.path.isdir(folder):
            os.makedirs(folder, exist_ok=True)
            fsync_directory(Path(self.directory))
        path = os.path.join(folder, f"{self.job}.{self.subtask_index}.jsonl")
        line = (json.dumps({"checkpoint": checkpoint_id, "files": pending}) + "\n").encode()
        created = not os.path.exists(path)
        with open(path, "a+b") as log:
            log.seek(0, os.SEEK_END)
            if log.tell() > 0:
                log.seek(-1, os.SEEK_END)
                if log.read(1) != b"\n":
                    line = b"\n" + line
            log.write(line)
            log.flush()
            os.fsync(log.fileno())
        if created:
            fsync_directory(Path(folder))

    def _publish(self, files: list[list[str]]) -> None:
        for in_progress, final in files:
            source = os.path.join(self.directory, in_progress)
            if os.path.exists(source):
                os.replace(source, os.path.join(self.directory, final))
        if files:
            _fsync_directory(self.directory)


def _read_log(path: str) -> list[dict]:
    """The entries of a commit log; a line a crash tore (never followed by a publish) is skipped."""
    entries = []
    with open(path, "rb") as log:
        for line in log:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("checkpoint"), int):
                entries.append(entry)
    return entries


def _fsync_directory(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)

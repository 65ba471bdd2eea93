"""The ``filesystem`` connector: csv (with a header), JSON lines and parquet files.

As a source, 'path' is a file or a directory; each file is a split, so is
each row group of a parquet file with several (``<path>#rg<k>``), and, where
'source.split-size' is set, so is each that many bytes of a larger csv or JSON
lines file (``<path>#bytes<k>``: the lines that start in bytes [k·size, (k+1)·size);
a csv range reads the file's header line first), so that one big file is read
in parallel. A split's offset is the number of its rows already emitted. The
splits of one file form a chain (``Source.chain``): a reader reads them one
after another, and only the one it is reading holds the watermark back. The
splits of a file go round-robin from the file's place (``owner``), so each
subtask reads every p-th part. As a sink, 'path' is a directory of part files
(see ``filesystem_sink``).

With 'source.monitor-interval' (Flink's option) the source is unbounded: it
lists 'path' at that interval and reads each file that was not there before,
once. It is one split, whose offset is the files read so far and the rows
emitted of the one being read (``{"done": [...], "file": ..., "rows": n}``):
a restored job skips the files it read and resumes inside the one it was
reading, so each file is read exactly once across restarts. A file is read
when it appears under a name that does not start with '.' or '_': a writer
writes ``.name.tmp`` (or ``_name``) and renames it into the directory when it
is complete, as Flink's file sinks do; a file is never read twice, so one that
grows after it appeared is not read again. New files are read in name order.
Between listings the source yields empty batches (the job checkpoints and
obeys a stop meanwhile; with 'source.idle-timeout' the split goes idle).

Malformed rows (wrong number of fields, a value that does not convert, a line
that is not JSON) fail the job with the file and line, unless
'<format>.ignore-parse-errors' = 'true': then they are skipped and counted in
``skipped_rows``.
"""
from __future__ import annotations

import io
import os
import re
import time
from typing import Any, BinaryIO, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Source, option_value, split_hash
from weir.engine.connectors.file_readers import READERS, Block, FileReader, refuse_misread_types
from weir.engine.connectors.filesystem_sink import FileSystemSink
from weir.engine.connectors.options import parse_bool, parse_char, parse_duration_seconds, parse_size
from weir.engine.errors import ConnectorOptionError, SourceError

FORMATS = ("csv", "json", "parquet")
#: A sink format only: each change as a Debezium envelope (see ``filesystem_sink``).
DEBEZIUM_JSON = "debezium-json"
#: Splits a parquet file with several row groups: '<path>#rg<k>'.
ROW_GROUP_MARK = "#rg"
#: Splits a csv or JSON lines file larger than 'source.split-size': '<path>#bytes<k>'.
BYTE_RANGE_MARK = "#bytes"
#: weir's option (Flink reads a text file as one split): the bytes of a text file's split.
SPLIT_SIZE = "source.split-size"
#: Flink's option: list the path at this interval and read new files (an unbounded source).
MONITOR_INTERVAL = "source.monitor-interval"
#: Seconds a watched source sleeps between the empty batches it yields while it waits.
WATCH_POLL_SECONDS = 0.05
EXTENSIONS = {
    "csv": (".csv",),
    "json": (".json", ".jsonl", ".ndjson"),
    "parquet": (".parquet", ".pq"),
}

# A file name's last run of digits (outside its folders): "data/part-0003.csv" -> ("data/part-", "0003", ".csv").
_LAST_NUMBER = re.compile(r"(?P<head>.*?)(?P<number>\d+)(?P<tail>[^/\d]*)$", re.DOTALL)


class FileSystemSource(Source):
    #: A file's batches are cut every 'weir.source.batch-size' rows (or row group): the reader may merge them.
    arbitrary_batches = True

    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        self.path = options["path"]
        self.format = options["format"]
        ignore_key = f"{self.format}.ignore-parse-errors"
        self.ignore_parse_errors = parse_bool(ignore_key, option_value(options, SPEC, ignore_key) or "false")
        self.delimiter = parse_char("csv.field-delimiter", option_value(options, SPEC, "csv.field-delimiter"))
        self._open_file: tuple[str, pq.ParquetFile] | None = None
        #: The columns read from a parquet file (``project``); None: every declared one.
        self.read_columns: list[str] | None = None
        interval = options.get(MONITOR_INTERVAL)
        #: Seconds between listings of a watched path, or None (read what is there, then end).
        self.monitor_interval = parse_duration_seconds(MONITOR_INTERVAL, interval) if interval else None
        if self.monitor_interval == 0:
            raise ConnectorOptionError(f"option '{MONITOR_INTERVAL}' must be longer than 0",
                                       hint=f"write for example '{MONITOR_INTERVAL}' = '1s'")
        #: Bytes per split of a large text file (``splits``), or None: a text file is one split.
        size = option_value(options, SPEC, SPLIT_SIZE)
        self.split_size = parse_size(SPLIT_SIZE, size) if size else None
        if self.split_size is not None and self.split_size < 1:
            raise ConnectorOptionError(f"option '{SPLIT_SIZE}' must be at least 1 byte",
                                       hint=f"write for example '{SPLIT_SIZE}' = '32MB'")

    @property
    def bounded(self) -> bool:
        return self.monitor_interval is None

    def splits(self) -> list[str]:
        if self.monitor_interval is not None:
            list_files(self.path, self.format)  # the path must exist
            return [self.path]
        out = []
        for path in list_files(self.path, self.format):
            if self.format == "parquet":
                parts, mark = _row_groups(path, self.schema), ROW_GROUP_MARK
            elif self.split_size is not None:
                parts, mark = -(-os.path.getsize(path) // self.split_size), BYTE_RANGE_MARK
            else:
                parts, mark = 1, ""
            out += [path] if parts <= 1 else [f"{path}{mark}{k}" for k in range(parts)]
        return out

    def project(self, columns: list[str]) -> None:
        """Parquet reads only ``columns`` (a columnar file skips the rest). A csv file's lines
        are still split whole (a row with the wrong number of fields is malformed), but only
        the values of ``columns`` are converted, and so checked, as Flink's csv format does
        with projection push-down. JSON lines are parsed whole, every field checked."""
        if self.format == "parquet" or (self.format == "csv" and columns):
            self.read_columns = columns

    def chain(self, split: str) -> str:
        return _part(split)[0]

    def owner(self, split: str, parallelism: int) -> int:
        """A file goes to a stable hash of its path with its last number taken out, plus that
        number: numbered files (part-0.csv, part-1.csv, ...; 2024-01-01.csv, 2024-01-02.csv)
        go round-robin as their numbers count up. A file's parts (a parquet file's row groups,
        a text file's byte ranges) go round-robin from the file's place, so every subtask
        reads a share of one big file."""
        path, _, part = _part(split)
        if part is not None:
            return (split_hash(path) + part) % parallelism
        numbered = _LAST_NUMBER.match(split)
        if numbered is None:
            return super().owner(split, parallelism)
        stem = numbered["head"] + "#" + numbered["tail"]
        return (split_hash(stem) + int(numbered["number"][-9:])) % parallelism

    def read(self, split: str, offset: Any = None) -> Iterator[tuple[pa.RecordBatch, Any]]:
        """Batches of ``split`` after its first ``offset`` emitted rows (a watched path: see
        the module docstring)."""
        if self.monitor_interval is not None:
            return self._watch(offset or {})
        return self._read_split(split, int(offset or 0))

    def _watch(self, offset: dict) -> Iterator[tuple[pa.RecordBatch, Any]]:
        done = tuple(offset.get("done", ()))
        seen = set(done)
        current, rows = offset.get("file"), int(offset.get("rows", 0))
        nothing = pa.RecordBatch.from_pylist([], schema=self.schema)
        while True:
            pending = [current] if current else []
            pending += [f for f in list_files(self.path, self.format) if f not in seen and f != current]
            for path in pending:
                if self.format == "parquet":
                    _row_groups(path, self.schema)  # refuses column types that would be misread
                skip = rows if path == current else 0
                for batch, position in self._read_split(path, skip):
                    yield batch, {"done": done, "file": path, "rows": position}
                done += (path,)
                seen.add(path)
                current, rows = None, 0
                yield nothing, {"done": done, "file": None, "rows": 0}
            listed_at = time.monotonic()
            while (left := listed_at + self.monitor_interval - time.monotonic()) > 0:
                time.sleep(min(left, WATCH_POLL_SECONDS))
                yield nothing, {"done": done, "file": None, "rows": 0}

    def _read_split(self, split: str, offset: int) -> Iterator[tuple[pa.RecordBatch, int]]:
        reader = self._reader(split)
        blocks = reader.blocks(skip=offset)
        emitted = None
        for block in blocks:
            if emitted is None:
                emitted = reader.rows_passed_over
            self._account_bad_rows(split, block, emitted, offset)
            rows = block.rows
            start = max(0, offset - emitted)
            emitted += rows.num_rows
            if start >= rows.num_rows:
                continue
            position = emitted - rows.num_rows + start
            for batch in rows.slice(start).combine_chunks().to_batches(max_chunksize=self.batch_size):
                position += batch.num_rows
                yield batch, position

    def _reader(self, split: str) -> FileReader:
        path, mark, part = _part(split)
        if self.format != "parquet":
            options = {"delimiter": self.delimiter} if self.format == "csv" else {}
            ranged = mark == BYTE_RANGE_MARK and self.split_size is not None  # else a file named so
            reader = READERS[self.format](path if ranged else split, self.schema, self.batch_size, **options)
            reader.read_columns = self.read_columns
            if ranged:
                size, header = self.split_size, self.format == "csv"
                reader.open_bytes = lambda: _ByteRange(path, part * size, (part + 1) * size, header)
            return reader
        if part is None:
            reader = READERS[self.format](split, self.schema, self.batch_size)
            reader.read_columns = self.read_columns
            return reader
        reader = READERS[self.format](path, self.schema, self.batch_size)
        reader.row_group = part
        reader.read_columns = self.read_columns
        if self._open_file is None or self._open_file[0] != path:
            self._open_file = (path, pq.ParquetFile(path))  # one footer read for all its row groups
        reader.file = self._open_file[1]
        return reader

    def _account_bad_rows(self, split: str, block: Block, emitted: int, offset: int) -> None:
        if not block.bad:
            return
        if not self.ignore_parse_errors:
            first = block.bad[0]
            path, mark, part = _part(split)
            line = first.line
            if mark != BYTE_RANGE_MARK or self.split_size is None:
                path = split
            elif part:  # the reader counted from the range's start
                with _ByteRange(path, part * self.split_size, 0, self.format == "csv") as found:
                    line += _lines_before(path, found.start) - (1 if self.format == "csv" else 0)
            raise SourceError(
                f"malformed row in '{path}' at line {line}: {first.message}",
                hint=f"fix the file, or skip such rows with '{self.format}.ignore-parse-errors' = 'true'",
            )
        # Rows before a resumed offset were counted by the run that emitted them.
        self.skipped_rows += sum(1 for bad in block.bad if emitted + bad.good_before >= offset)


def _part(split: str) -> tuple[str, str, int | None]:
    """(file, mark, part number) of a split: a parquet row group's, a text byte range's, or
    (split, "", None) for a whole file."""
    for mark in (ROW_GROUP_MARK, BYTE_RANGE_MARK):
        path, found, number = split.rpartition(mark)
        if found and number.isdigit():
            return path, mark, int(number)
    return split, "", None


class _ByteRange(io.RawIOBase):
    """The lines of a text file that start in bytes [``start``, ``end``) (``end`` 0: the range
    is only opened to find its start), preceded by the file's first line where ``header``:
    a line starting before ``start`` belongs to the range before (pyarrow's default, which
    weir keeps: a quoted csv value holds no newline, so a line is a row)."""

    def __init__(self, path: str, start: int, end: int, header: bool):
        self._file: BinaryIO = open(path, "rb")
        self._size = os.fstat(self._file.fileno()).st_size
        self._head = self._file.readline() if header else b""
        self.start = self._line_start(start)
        self._left = max(0, self._line_start(end) - self.start) if end else 0
        self._file.seek(self.start)

    def _line_start(self, offset: int) -> int:
        """The first line start at or after ``offset`` (past the header), or the file's end."""
        if offset <= len(self._head):
            return len(self._head)
        if offset >= self._size:
            return self._size
        self._file.seek(offset - 1)
        self._file.readline()
        return self._file.tell()

    def readable(self) -> bool:
        return True

    def readline(self, size: int = -1) -> bytes:
        head, self._head = self._head, b""
        return head

    def read(self, size: int = -1) -> bytes:
        if self._head:
            return self.readline()
        size = self._left if size is None or size < 0 else min(size, self._left)
        data = self._file.read(size)
        self._left -= len(data)
        return data

    def close(self) -> None:
        self._file.close()
        super().close()


def _lines_before(path: str, offset: int) -> int:
    """Newlines in the first ``offset`` bytes of ``path`` (an error's line number only)."""
    count = 0
    with open(path, "rb") as file:
        while offset > 0:
            chunk = file.read(min(offset, 1 << 24))
            if not chunk:
                break
            count += chunk.count(b"\n")
            offset -= len(chunk)
    return count


def _row_groups(path: str, schema: pa.Schema) -> int:
    """The row groups of a parquet file, once its column types were found to fit ``schema``."""
    try:
        file = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as error:
        raise SourceError(f"cannot read the parquet file '{path}': {error}",
                          hint="check that the file is complete and in the parquet format") from error
    refuse_misread_types(path, schema, file.schema_arrow)
    return file.metadata.num_row_groups


def list_files(path: str, fmt: str) -> list[str]:
    """The files of a source 'path': itself, or a directory's files, sorted.

    In a directory, hidden files and folders (starting with '.' or '_', such
    as in-progress part files and _SUCCESS markers) are ignored; if any file
    has the format's extension, only those are read.
    """
    if not os.path.exists(path):
        raise SourceError(
            f"the source path '{path}' does not exist",
            hint="create it, or correct the table's 'path' option",
        )
    if os.path.isfile(path):
        return [path]
    found: list[str] = []
    for folder, subfolders, files in os.walk(path):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith((".", "_")))
        found += [os.path.join(folder, f) for f in files if not f.startswith((".", "_"))]
    found.sort()
    matching = [f for f in found if f.lower().endswith(EXTENSIONS[fmt])]
    return matching or found


SPEC = ConnectorSpec(
    name="filesystem",
    source=FileSystemSource,
    sink=FileSystemSink,
    options={
        "path": OptionSpec("a file or a directory of files (for a sink: a directory)", required=True),
        "format": OptionSpec("the file format ('debezium-json': a sink's changelog as Debezium JSON)",
                             required=True, choices=(*FORMATS, DEBEZIUM_JSON)),
        MONITOR_INTERVAL: OptionSpec(
            "list the path at this interval and read files that appeared (the source is then unbounded); "
            "names starting with '.' or '_' are not read (write there, then rename)", value_type="duration"),
        SPLIT_SIZE: OptionSpec(
            "read a csv or JSON lines file larger than this as splits of this many bytes (ranges of whole "
            "lines), which the subtasks read in parallel (unset: a file is one split; the watermark restarts "
            "at each split, so late rows may then depend on the parallelism)", value_type="size"),
        "sink.rolling-policy.file-size": OptionSpec(
            "roll to a new part file after this many bytes", default="128MB", value_type="size"
        ),
    },
    format_options={
        "csv": {
            "csv.ignore-parse-errors": OptionSpec(
                "skip malformed rows instead of failing", default="false", choices=("true", "false")
            ),
            "csv.field-delimiter": OptionSpec("the field delimiter, one character", default=",", value_type="char"),
        },
        "json": {
            "json.ignore-parse-errors": OptionSpec(
                "skip malformed lines instead of failing", default="false", choices=("true", "false")
            ),
        },
        "parquet": {},
    },
    sink_only_formats=(DEBEZIUM_JSON,),
    changelog_formats=(DEBEZIUM_JSON,),
)

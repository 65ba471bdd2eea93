"""Reading one file of a filesystem source as batches of the declared schema.

Each reader yields ``Block``s: the good rows of a stretch of the file, already
selected and cast to the declared schema, and the malformed rows found in it
with their line numbers. The good path is one vectorised pyarrow call per
block; only a block that fails is looked at more closely:

- csv: the block is parsed with the declared types. Rows with the wrong
  number of fields go to pyarrow's ``invalid_row_handler``. If a value does
  not convert, the block is parsed again as strings and each column is cast;
  a failing cast is bisected down to the bad values.
- json: the block of lines is parsed with an explicit schema; if that fails,
  the lines are bisected down to the bad ones.
- parquet: row groups are read with ``iter_batches``; there is nothing to
  locate, a failing cast names the column.

Line numbers are 1-based and count the header line. As in pyarrow's
defaults, a quoted csv value may not contain a newline.
"""
from __future__ import annotations

import io
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from weir.engine.connectors.timestamps import declared_precision
from weir.engine.connectors.timestamps import truncate as truncate_timestamps
from weir.engine.errors import SourceError

#: Bytes in the first block of a text file, before the row size is known.
FIRST_BLOCK_BYTES = 1 << 20
MIN_BLOCK_BYTES, MAX_BLOCK_BYTES = 64 << 10, 256 << 20
#: A CSV block larger than this is parsed on pyarrow's threads, in pieces of this size.
CSV_THREAD_BLOCK_BYTES = 1 << 20
#: Stop bisecting below this many rows and test them one by one.
BISECT_LEAF = 16
#: Columns a JSON file's first lines are sampled from, to report missing ones.
JSON_SAMPLE_LINES = 100


@dataclass
class BadRow:
    line: int
    #: Good rows of the same block before this one (to count skips after a resume).
    good_before: int
    message: str


@dataclass
class Block:
    rows: pa.Table
    bad: list[BadRow] = field(default_factory=list)


class FileReader:
    """Common to the text formats: blocks of whole lines, sized to ``batch_size`` rows."""

    def __init__(self, path: str, schema: pa.Schema, batch_size: int):
        self.path = path
        self.schema = schema
        self.batch_size = batch_size

    #: Rows that ``blocks(skip)`` passed over without yielding them (whole parquet row groups).
    rows_passed_over = 0
    #: Read only these declared columns (``FileSystemSource.project``), or all when None.
    read_columns: list[str] | None = None

    @property
    def read_schema(self) -> pa.Schema:
        """The declared columns that are read, in declared order."""
        if self.read_columns is None:
            return self.schema
        return pa.schema([f for f in self.schema if f.name in self.read_columns], metadata=self.schema.metadata)

    def blocks(self, skip: int = 0) -> Iterator[Block]:
        """The file's rows, block by block; ``skip`` is a hint that lets a
        reader pass over that many rows unread where it can."""
        raise NotImplementedError

    def open_bytes(self) -> BinaryIO:
        """The text file's bytes (``FileSystemSource`` gives a byte range of a big file instead)."""
        return open(self.path, "rb")

    def _line_blocks(self, file: BinaryIO) -> Iterator[tuple[bytes, int]]:
        """Chunks of ``file`` cut after a newline, with the newlines each holds; sized from the
        rows seen so far."""
        carry = b""
        size = FIRST_BLOCK_BYTES
        seen_bytes = seen_lines = 0
        while True:
            chunk = file.read(size)
            if not chunk:
                if carry.strip():
                    yield carry, count_newlines(carry)
                return
            data = carry + chunk
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            block, carry = data[: cut + 1], data[cut + 1 :]
            lines = count_newlines(block)
            yield block, lines
            seen_bytes += len(block)
            seen_lines += lines
            per_row = max(1, seen_bytes // max(1, seen_lines))
            size = min(MAX_BLOCK_BYTES, max(MIN_BLOCK_BYTES, per_row * self.batch_size))

    def _missing_columns(self, found: list[str]) -> None:
        missing = [name for name in self.schema.names if name not in found]
        if missing:
            raise SourceError(
                f"file '{self.path}' has no column '{missing[0]}'"
                + (f" (nor {', '.join(repr(m) for m in missing[1:])})" if len(missing) > 1 else "")
                + f"; the columns found are: {', '.join(found) or '(none)'}",
                hint="make the table's column names match the file, or point 'path' at the right files",
            )


def count_newlines(data: bytes) -> int:
    """The newlines in ``data``. numpy compares the bytes without holding the GIL, which
    ``bytes.count`` holds (three times as long): the source reads ahead in a thread beside the job's."""
    return int(np.count_nonzero(np.frombuffer(data, np.uint8) == ord("\n")))


def conform(table: pa.Table, schema: pa.Schema, path: str) -> pa.Table:
    """The declared columns, in declared order, with the declared types."""
    columns = []
    for target in schema:
        column = table.column(target.name)
        if column.type != target.type:
            safe = not (pa.types.is_timestamp(column.type) and pa.types.is_timestamp(target.type))
            try:
                column = pc.cast(column, target.type, safe=safe)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise SourceError(
                    f"file '{path}': column '{target.name}' of type {column.type} "
                    f"does not convert to the declared {target.type}: {error}",
                    hint="declare the column with the file's type",
                ) from None
        precision = declared_precision(target)
        if precision is not None:  # TIMESTAMP(3): the digits past the declared precision go
            column = truncate_timestamps(column, precision)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)


class CsvReader(FileReader):
    def __init__(self, path: str, schema: pa.Schema, batch_size: int, delimiter: str = ","):
        super().__init__(path, schema, batch_size)
        self.delimiter = delimiter

    def blocks(self, skip: int = 0) -> Iterator[Block]:
        with self.open_bytes() as file:
            header = self._header(file.readline())
            self._missing_columns(header)
            first_line = 2
            for data, lines in self._line_blocks(file):
                yield self._parse_block(data, header, first_line)
                first_line += lines

    def _header(self, line: bytes) -> list[str]:
        if line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        if not line.strip():
            return []
        table = pa_csv.read_csv(
            io.BytesIO(line),
            parse_options=pa_csv.ParseOptions(delimiter=self.delimiter),
        )
        return table.column_names

    def _read(self, data: bytes, header: list[str], types: dict[str, pa.DataType], invalid: list,
              threads: bool = False) -> pa.Table:
        """``data`` parsed; malformed rows skipped and put in ``invalid``. With ``threads`` the
        block is parsed in parallel in pieces of ``CSV_THREAD_BLOCK_BYTES`` (the rows keep their
        order), but pyarrow then does not number the malformed rows: a block with any is parsed
        again without (``_parse_block``)."""
        def on_invalid(row: pa_csv.InvalidRow) -> str:
            invalid.append(row)
            return "skip"

        threads = threads and len(data) > CSV_THREAD_BLOCK_BYTES
        return pa_csv.read_csv(
            io.BytesIO(data),
            read_options=pa_csv.ReadOptions(
                column_names=header, use_threads=threads,
                block_size=CSV_THREAD_BLOCK_BYTES if threads else len(data) + 1,
            ),
            parse_options=pa_csv.ParseOptions(delimiter=self.delimiter, invalid_row_handler=on_invalid),
            convert_options=pa_csv.ConvertOptions(
                column_types=types,
                include_columns=list(types),
                # Unquoted empty fields are null, quoted ones ("") empty strings,
                # which is how pyarrow's csv writer (and so our sink) writes them.
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )

    def _parse_block(self, data: bytes, header: list[str], first_line: int) -> Block:
        invalid: list[pa_csv.InvalidRow] = []
        schema = self.read_schema
        typed = {f.name: f.type for f in schema}
        try:
            table = self._read(data, header, typed, invalid, threads=True)
            if not invalid:
                return Block(conform(table, schema, self.path))
            invalid.clear()  # again on one thread, which numbers the malformed rows
            table = self._read(data, header, typed, invalid)
            bad_rows: dict[int, str] = {}
            undecodable: dict[int, str] = {}
        except pa.ArrowInvalid:
            invalid.clear()
            as_text = {name: pa.string() for name in schema.names}
            data, undecodable = _blank_undecodable_lines(data)
            table = self._read(data, header, as_text, invalid)
            table, bad_rows = self._cast_locating_bad(table)
        return self._with_line_numbers(data, table, invalid, bad_rows, first_line, undecodable)

    def _cast_locating_bad(self, table: pa.Table) -> tuple[pa.Table, dict[int, str]]:
        """Cast string columns to the declared types; {row: problem} for values that fail."""
        bad: dict[int, str] = {}
        schema = self.read_schema
        for target in schema:
            if pa.types.is_string(target.type) or pa.types.is_large_string(target.type):
                continue
            column = table.column(target.name).combine_chunks()
            for row in _failing_positions(column, target.type):
                bad.setdefault(row, f"column '{target.name}': '{column[row].as_py()}' is not a valid {target.type}")
        if bad:
            keep = pc.invert(pc.is_in(pa.array(range(table.num_rows), pa.int64()), pa.array(sorted(bad), pa.int64())))
            table = table.filter(keep)
        return conform(table, schema, self.path), bad

    def _with_line_numbers(
        self, data: bytes, table: pa.Table, invalid: list, bad_rows: dict[int, str], first_line: int,
        undecodable: dict[int, str],
    ) -> Block:
        """Number the malformed rows (the failure path only). ``undecodable``: the positions of
        lines that are not UTF-8 (blanked in ``data``) with their problem."""
        lines = data.split(b"\n")
        non_empty = [i for i, text in enumerate(lines) if text not in (b"", b"\r")]
        invalid_at = {row.number: row for row in invalid}
        parsed = [p for n, p in enumerate(non_empty, start=1) if n not in invalid_at]
        bad: list[BadRow] = []
        good_lines = [p for r, p in enumerate(parsed) if r not in bad_rows]
        for number, row in invalid_at.items():
            position = non_empty[number - 1] if number is not None and number <= len(non_empty) else 0
            bad.append(BadRow(
                first_line + position,
                bisect_right(good_lines, position),
                f"expected {row.expected_columns} fields, found {row.actual_columns}: '{_clip(row.text)}'",
            ))
        for r, problem in bad_rows.items():
            position = parsed[r]
            bad.append(BadRow(first_line + position, bisect_right(good_lines, position), problem))
        for position, problem in undecodable.items():
            bad.append(BadRow(first_line + position, bisect_right(good_lines, position), problem))
        bad.sort(key=lambda b: b.line)
        return Block(table, bad)


def _blank_undecodable_lines(data: bytes) -> tuple[bytes, dict[int, str]]:
    """``data`` with every line that is not valid UTF-8 made empty (the csv parser skips empty
    lines, and line positions stay as they were), and {line position: problem}. The lines are
    checked by a vectorised cast, bisected down to the bad ones (the failure path only)."""
    lines = data.split(b"\n")
    bad = _failing_positions(pa.array(lines, pa.binary()), pa.string())
    if not bad:
        return data, {}
    problems = {}
    for position in bad:
        try:
            lines[position].decode("utf-8")
            continue
        except UnicodeDecodeError as error:
            byte = lines[position][error.start]
            problems[position] = (f"the line is not valid UTF-8: byte 0x{byte:02X} at byte {error.start + 1} of the "
                                  f"line; the file must be UTF-8 (convert it, e.g. iconv -f latin1 -t utf-8)")
        lines[position] = b""
    return b"\n".join(lines), problems


def _failing_positions(column: pa.Array, target: pa.DataType) -> list[int]:
    """Positions whose value does not cast to ``target``: bisection, vectorised casts."""

    def fails(lo: int, hi: int) -> bool:
        try:
            pc.cast(column.slice(lo, hi - lo), target)
            return False
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return True

    found: list[int] = []
    pending = [(0, len(column))]
    while pending:
        lo, hi = pending.pop()
        if hi <= lo or not fails(lo, hi):
            continue
        if hi - lo <= BISECT_LEAF:
            found.extend(i for i in range(lo, hi) if fails(i, i + 1))
        else:
            mid = (lo + hi) // 2
            pending += [(mid, hi), (lo, mid)]
    return sorted(found)


class JsonReader(FileReader):
    """JSON lines: one object per line; unknown fields are ignored, absent ones are null."""

    def blocks(self, skip: int = 0) -> Iterator[Block]:
        with self.open_bytes() as file:
            first_line = 1
            for data, lines in self._line_blocks(file):
                if first_line == 1:
                    self._check_columns(data)
                yield self._parse_block(data, first_line)
                first_line += lines

    def _check_columns(self, data: bytes) -> None:
        sample = b"\n".join(data.split(b"\n", JSON_SAMPLE_LINES)[:JSON_SAMPLE_LINES])
        try:
            found = pa_json.read_json(io.BytesIO(sample)).column_names
        except pa.ArrowInvalid:
            return  # a malformed line: the block parse reports it with its line number
        self._missing_columns(found)

    def _read(self, data: bytes) -> pa.Table:
        return pa_json.read_json(
            io.BytesIO(data),
            read_options=pa_json.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 16)),
            parse_options=pa_json.ParseOptions(
                explicit_schema=self.schema, unexpected_field_behavior="ignore"
            ),
        )

    def _parse_block(self, data: bytes, first_line: int) -> Block:
        try:
            return Block(conform(self._read(data), self.schema, self.path))
        except pa.ArrowInvalid:
            pass
        lines = data.split(b"\n")
        problems: dict[int, str] = {}
        pending = [(0, len(lines))]
        while pending:
            lo, hi = pending.pop()
            chunk = b"\n".join(lines[lo:hi])
            if hi <= lo or not chunk.strip():
                continue
            try:
                self._read(chunk)
                continue
            except pa.ArrowInvalid as error:
                if hi - lo == 1:
                    problems[lo] = f"{_json_reason(error)}: '{_clip(lines[lo].decode('utf-8', 'replace'))}'"
                    continue
            mid = (lo + hi) // 2
            pending += [(mid, hi), (lo, mid)]
        good = [i for i, text in enumerate(lines) if i not in problems and text.strip()]
        table = self._read(b"\n".join(lines[i] for i in good)) if good else self.schema.empty_table()
        bad = [BadRow(first_line + i, bisect_right(good, i), message) for i, message in sorted(problems.items())]
        return Block(conform(table, self.schema, self.path), bad)


class ParquetReader(FileReader):
    #: Read only this row group (a split of its own), or every row group when None.
    row_group: int | None = None
    #: The file already opened (its footer read) for another row group of it, if any.
    file: pq.ParquetFile | None = None

    def blocks(self, skip: int = 0) -> Iterator[Block]:
        file = self.file or pq.ParquetFile(self.path)
        self._missing_columns(file.schema_arrow.names)
        refuse_misread_types(self.path, self.schema, file.schema_arrow)
        groups = list(range(file.num_row_groups)) if self.row_group is None else [self.row_group]
        self.rows_passed_over = 0
        while groups and self.rows_passed_over + file.metadata.row_group(groups[0]).num_rows <= skip:
            self.rows_passed_over += file.metadata.row_group(groups.pop(0)).num_rows
        if not groups:
            return
        schema = self.read_schema
        # One thread: the source reads ahead in a thread of its own (``engine.runtime.read_ahead``),
        # beside the job's; pyarrow's pool for a 64K-row group cost more CPU (and time) than it saved.
        for batch in file.iter_batches(batch_size=self.batch_size, row_groups=groups, columns=schema.names,
                                       use_threads=False):
            yield Block(conform(pa.Table.from_batches([batch]), schema, self.path))


def refuse_misread_types(path: str, schema: pa.Schema, found: pa.Schema) -> None:
    """Refuse a parquet column whose numbers would be read as times, or times as numbers: a
    cast between them takes the numbers as the target's unit, so epoch milliseconds declared
    TIMESTAMP(3) would become microseconds (windows in 1970)."""
    for target in schema:
        if target.name not in found.names:
            continue
        kind = found.field(target.name).type
        numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
        if pa.types.is_timestamp(target.type) and numeric:
            raise SourceError(
                f"file '{path}': column '{target.name}' is declared TIMESTAMP but the file holds {kind} "
                "numbers, which would be read as microseconds",
                hint=f"declare '{target.name}' BIGINT, or write it to the file as a parquet timestamp "
                     f"(e.g. DuckDB: SELECT epoch_ms({target.name}) AS {target.name} for epoch milliseconds)",
            )
        is_number = pa.types.is_integer(target.type) or pa.types.is_floating(target.type)
        if is_number and pa.types.is_timestamp(kind):
            raise SourceError(
                f"file '{path}': column '{target.name}' is declared {target.type} but the file holds "
                f"{kind} values",
                hint=f"declare '{target.name}' TIMESTAMP(3)",
            )


def _json_reason(error: Exception) -> str:
    text = str(error).split("\n")[0]
    return text.replace(" in row 0", "")


def _clip(text: str, limit: int = 120) -> str:
    text = text.rstrip("\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."


READERS: dict[str, Callable[..., FileReader]] = {
    "csv": CsvReader,
    "json": JsonReader,
    "parquet": ParquetReader,
}

"""Rendering for people: errors with a caret, aligned tables, the progress line, the summary."""
from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from typing import Iterator

import duckdb
import pyarrow as pa

from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.operators.registry import operator_class
from weir.engine.runtime.local import JobResult, Progress
from weir.sql.errors import WeirSqlError


def _paint(text: str, code: str, colour: bool) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if colour else text


def sql_error(error: WeirSqlError, text: str | None, source_name: str | None, colour: bool = False) -> str:
    lines = (text or error.text or "").splitlines()
    name = source_name or error.source_name or "<sql>"
    out = []
    for problem in error.problems:
        where = f"{name}:{problem.line}:{problem.col}" if problem.line else name
        out.append(f"{where}: {_paint('error', '1;31', colour)}: {problem.message}")
        if problem.line and 0 < problem.line <= len(lines):
            source_line = lines[problem.line - 1]
            out.append(f"  {source_line}")
            if problem.col:
                # Keep the line's tabs, so the caret lands under the column however tabs are shown.
                indent = "".join(c if c == "\t" else " " for c in source_line[: problem.col - 1])
                out.append("  " + indent + _paint("^", "1;32", colour))
        if problem.hint:
            out.append(f"  {_paint('hint', '1;36', colour)}: {problem.hint}")
    return "\n".join(out)


def sql_error_at_prompt(error: WeirSqlError, text: str, colour: bool = False) -> str:
    """An error in what was typed at the prompt, as psql shows one: the message,
    the statement's line with a caret under the position, the hint."""
    lines = text.splitlines()
    out = []
    for problem in error.problems:
        out.append(f"{_paint('error', '1;31', colour)}: {problem.message}")
        if problem.line and 0 < problem.line <= len(lines):
            label = f"LINE {problem.line}: "
            source_line = lines[problem.line - 1]
            out.append(label + source_line)
            if problem.col:
                indent = "".join(c if c == "\t" else " " for c in source_line[: problem.col - 1])
                out.append(" " * len(label) + indent + _paint("^", "1;32", colour))
        if problem.hint:
            out.append(f"{_paint('hint', '1;36', colour)}: {problem.hint}")
    return "\n".join(out)


def message_error(message: str, hint: str | None, colour: bool = False) -> str:
    text = f"{_paint('error', '1;31', colour)}: {message}"
    return text + (f"\n  {_paint('hint', '1;36', colour)}: {hint}" if hint else "")


def engine_error(error: EngineError, colour: bool = False) -> str:
    head = f"{_paint('error', '1;31', colour)}: "
    if error.operator_id:
        head += f"in operator {error.operator_id}: "
    text = head + error.message
    if error.hint:
        text += f"\n  {_paint('hint', '1;36', colour)}: {error.hint}"
    return text


def timestamp(us: int) -> str:
    if us in (MIN_WATERMARK, MAX_WATERMARK):
        return "-" if us == MIN_WATERMARK else "end of input"
    return datetime.fromtimestamp(us / 1e6, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def progress_line(p: Progress) -> str:
    return f"read {p.rows_read:,} rows  {p.rate:,.0f} rows/s  watermark {timestamp(p.watermark)}"


def size_text(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def checkpoint_text(event) -> str:
    return f"{event.kind} {event.checkpoint_id} ({size_text(event.size_bytes)}, {event.duration:.2f} s)"


def summary(result: JobResult, *, db_path: str | None, views: list[str], late_rows_tables: list[str] = ()) -> str:
    if result.finished_before:
        return result.finished_before
    if result.already_finished:
        return f"job {result.name} had already finished; the output of its final checkpoint is now committed"
    ended = f"stopped with {checkpoint_text(result.stopped_with)} at {result.stopped_with.path}" \
        if result.stopped_with else "finished"
    out = [
        f"job {result.name} {ended} in {result.elapsed:.2f} s: {result.rows_read:,} events read, "
        f"{result.events_per_second:,.0f} events/s"
    ]
    rows = [["operator", "rows in", "rows out", "late dropped"]]
    for m in result.operators:
        kind = operator_class(m.kind)
        late = m.counters.get("late_rows_dropped", 0 if kind.windowed else None)
        rows.append([m.id, "-" if kind.reads_source else f"{m.rows_in:,}",
                     "-" if kind.commits_output else f"{m.rows_out:,}", "-" if late is None else f"{late:,}"])
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        out.append("  " + r[0].ljust(widths[0]) + "  " + "  ".join(c.rjust(w) for c, w in zip(r[1:], widths[1:])))
    out.append(f"  late rows dropped: {result.counter('late_rows_dropped'):,}; "
               f"malformed rows skipped: {result.counter('malformed_rows_skipped'):,}; "
               f"rows with a NULL event time dropped: {result.null_time_rows_dropped:,}")
    if result.counter("udf_bad_rows"):
        out.append(f"  rows a Python UDF raised on (kept in the bad-rows table): {result.counter('udf_bad_rows'):,}")
    partials = result.counter("pre_aggregated_rows")
    if partials:
        combined = sum(m.rows_in for m in result.operators if m.counters.get("pre_aggregated_rows"))
        out.append(f"  two-phase aggregation: {combined:,} rows crossed the exchange as {partials:,} partial rows")
    by_source = {source: n for source, n in result.late_rows_by_source().items() if n}
    if by_source:
        out.append("  late rows dropped per source: " + ", ".join(f"{s} {n:,}" for s, n in by_source.items()))
    periodic = [c for c in result.checkpoints if c.kind == "checkpoint"]
    if len(periodic) > 1:  # more than the final one: checkpointing was on
        sizes = sum(c.size_bytes for c in periodic)
        longest = max(c.duration for c in periodic)
        out.append(f"  checkpoints: {len(periodic)} completed ({size_text(sizes)} in all, longest {longest:.2f} s); "
                   f"last: {checkpoint_text(periodic[-1])}")
    for event in result.checkpoints:
        if event.kind == "savepoint":
            out.append(f"  {checkpoint_text(event)} at {event.path}")
    if views:
        out.append(f"  materialized views in {db_path}: {', '.join(views)}")
        out.append(f'  query them with: weir query "SELECT * FROM {views[0]} LIMIT 10" --db {db_path}')
    if late_rows_tables:
        out.append(f"  late rows kept in {db_path}: {', '.join(late_rows_tables)}")
    return "\n".join(out)


def cell(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="milliseconds" if value.microsecond % 1000 == 0 else "microseconds")
    if isinstance(value, float):
        return repr(value)
    return str(value)


#: Rows per Arrow batch when an answer is written whole (a pipe, csv, json).
BATCH_ROWS = 65_536
#: At most this many rows of an answer are shown on a terminal: the first and the last half
#: (the DuckDB CLI's habit); `weir query --max-rows N`, `\pset max_rows N` change it, 0 shows all.
DEFAULT_MAX_ROWS = 40
#: The output formats (psql's `\pset format`; `aligned` is psql's name for table).
FORMATS = ("table", "csv", "json", "markdown", "line")
FORMAT_ALIASES = {"aligned": "table", "unaligned": "csv"}


class TableAnswer:
    """An answer held as an Arrow table (SHOW, DESCRIBE, SET): ``rows_at`` slices it (no copy)."""

    def __init__(self, table: pa.Table):
        self.table_ = table
        self.schema = table.schema
        self.rows = table.num_rows
        #: Rows handed to the renderer so far (what a capped render read).
        self.fetched = 0

    def rows_at(self, offset: int, count: int) -> pa.Table:
        part = self.table_.slice(offset, count)
        self.fetched += part.num_rows
        return part

    def batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self.table_.to_batches(BATCH_ROWS):
            self.fetched += batch.num_rows
            yield batch

    def all(self) -> pa.Table:
        return self.table_

    def close(self) -> None:
        pass


class DuckAnswer:
    """A query's answer kept inside DuckDB, in a temporary table of the query's own connection:
    the query runs once; a capped render then fetches only the rows it shows (LIMIT/OFFSET over
    the temporary table, which keeps the query's order) and the count; csv or json of all of it
    streams batch by batch. Owns ``connection``: ``close()`` it when done."""

    NAME = "__weir_answer"

    def __init__(self, connection, sql: str):
        self.connection = connection
        connection.sql(f"CREATE OR REPLACE TEMP TABLE {self.NAME} AS {sql.strip().rstrip(';')}")
        self.rows = connection.sql(f"SELECT count(*) FROM {self.NAME}").fetchall()[0][0]
        self.schema = connection.sql(f"SELECT * FROM {self.NAME} LIMIT 0").to_arrow_table().schema
        self.fetched = 0

    def rows_at(self, offset: int, count: int) -> pa.Table:
        part = self.connection.sql(f"SELECT * FROM {self.NAME} LIMIT {int(count)} OFFSET {int(offset)}").to_arrow_table()
        self.fetched += part.num_rows
        return part

    def batches(self) -> Iterator[pa.RecordBatch]:
        for batch in self.connection.sql(f"SELECT * FROM {self.NAME}").to_arrow_reader(BATCH_ROWS):
            self.fetched += batch.num_rows
            yield batch

    def all(self) -> pa.Table:
        return pa.Table.from_batches(list(self.batches()), self.schema)

    def close(self) -> None:
        self.connection.close()


def query_answer(connection, sql: str):
    """The answer of ``sql`` on ``connection``: a ``DuckAnswer`` for a query (the connection is
    then the answer's to close), an Arrow table for a statement that is no query (SHOW,
    DESCRIBE, PRAGMA: small answers), None for one that returns no rows. A bad query raises
    DuckDB's error for it."""
    try:
        return DuckAnswer(connection, sql)
    except duckdb.ParserException:
        relation = connection.sql(sql)
        return relation.to_arrow_table() if relation is not None else None


def answer_of(result) -> TableAnswer | DuckAnswer:
    return result if isinstance(result, (TableAnswer, DuckAnswer)) else TableAnswer(result)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


#: Field metadata asking for thousands separators in text (SHOW JOBS's counts): 1,234,567.
THOUSANDS = {b"weir.format": b"thousands"}


def _texts(part: pa.Table | pa.RecordBatch) -> list[list[str]]:
    """The cells of a few rows as text, column by column from the Arrow columns."""
    out = []
    for field, column in zip(part.schema, part.columns):
        separated = (field.metadata or {}).get(b"weir.format") == b"thousands"
        out.append([f"{v:,}" if separated and v is not None else cell(v) for v in column.to_pylist()])
    return out


def _count_line(shown: int, rows: int) -> str:
    line = f"({rows:,} row{'s' if rows != 1 else ''}"
    return line + (f", {shown:,} shown)" if shown < rows else ")")


def shown_parts(answer, max_rows: int) -> tuple[list[pa.Table], int]:
    """The parts of ``answer`` a capped render shows: all its rows when they are at most
    ``max_rows`` (0: no cap), else the first and the last ``max_rows // 2``."""
    if not max_rows or answer.rows <= max_rows:
        return [answer.rows_at(0, answer.rows)], answer.rows
    head = max_rows - max_rows // 2
    tail = max_rows // 2
    return [answer.rows_at(0, head), answer.rows_at(answer.rows - tail, tail)], head + tail


def render(result, fmt: str = "table", *, max_rows: int = 0, expanded: bool = False) -> str:
    """An answer (an Arrow table, or a ``DuckAnswer``) as text in one of ``FORMATS``, capped to
    ``max_rows`` (first and last rows and a count line: "(280,000 rows, 40 shown)") for the
    table, markdown and line formats; csv and json are always whole."""
    return "".join(write(result, fmt, max_rows=max_rows, expanded=expanded)).rstrip("\n")


def write(result, fmt: str = "table", *, max_rows: int = 0, expanded: bool = False) -> Iterator[str]:
    """``render``'s text in pieces, as it is made: a whole csv or json answer streams batch by
    batch; an uncapped table is aligned batch by batch (as psql's FETCH_COUNT does)."""
    answer = answer_of(result)
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    header = answer.schema.names
    numeric = [_numeric(t) for t in answer.schema.types]
    if fmt == "csv":
        yield from _csv(answer, header)
        return
    if fmt == "json":
        yield from _json(answer)
        return
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    if max_rows or answer.rows <= BATCH_ROWS:
        parts, shown = shown_parts(answer, max_rows)
    else:
        parts, shown = answer.batches(), answer.rows
    if expanded or fmt == "line":
        yield from _expanded(parts, header, answer.rows, shown, line_mode=not expanded)
        return
    if max_rows or answer.rows <= BATCH_ROWS:
        yield from _aligned([_texts(part) for part in parts], header, numeric, fmt, answer.rows > shown)
    else:  # everything, batch by batch, each aligned on its own (psql's FETCH_COUNT)
        for index, part in enumerate(parts):
            yield from _aligned([_texts(part)], header, numeric, fmt, False, header_line=index == 0)
    if fmt == "table" or shown < answer.rows:
        yield _count_line(shown, answer.rows) + "\n"


def _aligned(texts_by_part, header, numeric, fmt, gap, header_line=True) -> Iterator[str]:
    """Rows (the cells of each part, column by column) as aligned text; numbers to the right;
    a row of … between the parts when rows were left out (``gap``)."""
    widths = [max([len(h), *(len(v) for texts in texts_by_part for v in texts[i])]) for i, h in enumerate(header)]
    if fmt == "markdown":
        def line(cells):
            return "| " + " | ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric)) + " |"
        rule = "|" + "|".join(("-" * (w + 1) + ":") if n else ("-" * (w + 2)) for w, n in zip(widths, numeric)) + "|"
    else:
        def line(cells):
            return " | ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric)).rstrip()
        rule = "-+-".join("-" * w for w in widths)
    if header_line:
        yield line(header) + "\n" + rule + "\n"
    for index, texts in enumerate(texts_by_part):
        if index and gap:
            yield line(["…"] * len(header)) + "\n"
        for row in zip(*texts):
            yield line(row) + "\n"


def _expanded(parts, header, rows, shown, line_mode) -> Iterator[str]:
    """psql's expanded display (`\\x`): one block per row, a column a line; or the DuckDB CLI's
    `.mode line` (``line_mode``): `name = value` lines, a blank line between rows."""
    width = max((len(h) for h in header), default=0)
    number = 0
    for index, part in enumerate(parts):
        texts = _texts(part)
        if index and shown < rows:
            number = rows - part.num_rows
            yield "…\n"
        for row in zip(*texts):
            number += 1
            if line_mode:
                yield ("\n" if number > 1 else "") + "".join(
                    f"{name.rjust(width)} = {value}\n" for name, value in zip(header, row))
                continue
            yield f"-[ RECORD {number} ]" + "\n"
            for name, value in zip(header, row):
                yield f"{name.ljust(width)} | {value}" + "\n"
    yield _count_line(shown, rows) + "\n"


def _csv(answer, header) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for batch in answer.batches():
        columns = [["" if v is None else cell(v) for v in column.to_pylist()] for column in batch.columns]
        writer.writerows(zip(*columns))
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()


def _json(answer) -> Iterator[str]:
    yield "["
    first = True
    for batch in answer.batches():
        for row in batch.to_pylist():
            yield ("" if first else ", ") + json.dumps(row, default=cell)
            first = False
    yield "]\n"


def table(result: pa.Table) -> str:
    return render(result, "table")


def csv_text(result: pa.Table) -> str:
    return render(result, "csv")


def json_text(result: pa.Table) -> str:
    return render(result, "json")

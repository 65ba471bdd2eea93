"""Rendering for people: errors with a caret, aligned tables, the progress line, the summary."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Iterator

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.operators.duckdb_sql import quote_ident, string_literal
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
#: Field metadata asking for thousands separators in text (SHOW JOBS's counts): 1,234,567.
THOUSANDS = {b"weir.format": b"thousands"}


class _InDuckDB:
    """What both kinds of answer share: their rows are a table ``NAME`` of ``connection``, so
    that DuckDB turns them into text (``text_batches``), a whole column at a time."""

    NAME = "__weir_answer"
    connection: duckdb.DuckDBPyConnection
    schema: pa.Schema
    rows: int
    #: Rows handed to the renderer so far (what a capped render read).
    fetched: int

    def text_batches(self, columns: list[str], offset: int = 0, count: int | None = None) -> Iterator[pa.RecordBatch]:
        """The rows ``offset`` to ``offset + count`` (all: None) as the SQL expressions
        ``columns`` over them make them, batch by batch, in the answer's order."""
        sql = f"SELECT {', '.join(columns)} FROM {self.NAME}"
        if count is not None:
            sql += f" LIMIT {int(count)} OFFSET {int(offset)}"
        return self.batches_of(sql)

    def rows_at(self, offset: int, count: int) -> pa.Table:
        """Rows ``offset`` to ``offset + count`` as they are (typed Arrow columns)."""
        return pa.Table.from_batches(list(self.text_batches(["*"], offset, count)), self.schema)

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Every row as it is, batch by batch."""
        return self.text_batches(["*"])

    def batches_of(self, sql: str) -> Iterator[pa.RecordBatch]:
        """The answer of ``sql`` (a query over ``NAME``, a row for each of its rows) in batches."""
        for batch in self.connection.sql(sql).to_arrow_reader(BATCH_ROWS):
            self.fetched += batch.num_rows
            yield batch


class TableAnswer(_InDuckDB):
    """An answer held as an Arrow table (SHOW, DESCRIBE, SET); shown through an in-memory DuckDB
    connection of its own that scans the table where it is (no copy)."""

    def __init__(self, table: pa.Table):
        names, seen = [], set()
        for name in table.schema.names:  # a name twice: the second is name_1, as DuckDB names it
            unique, n = name, 0
            while unique in seen:
                n += 1
                unique = f"{name}_{n}"
            seen.add(unique)
            names.append(unique)
        self.table_ = table if names == table.schema.names else table.rename_columns(names)
        self.schema = self.table_.schema
        self.rows = table.num_rows
        self.fetched = 0
        self._connection = None

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        if self._connection is None:
            self._connection = duckdb.connect()
            self._connection.register(self.NAME, self.table_)
        return self._connection

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
        if self._connection is not None:
            self._connection.close()
            self._connection = None


class DuckAnswer(_InDuckDB):
    """A query's answer kept inside DuckDB, in a temporary table of the query's own connection:
    the query runs once; a capped render then fetches only the rows it shows (LIMIT/OFFSET over
    the temporary table, which keeps the query's order) and the count; csv or json of all of it
    streams batch by batch. Owns ``connection``: ``close()`` it when done."""

    def __init__(self, connection, sql: str):
        self.connection = connection
        connection.sql(f"CREATE OR REPLACE TEMP TABLE {self.NAME} AS {sql.strip().rstrip(';')}")
        self.rows = connection.sql(f"SELECT count(*) FROM {self.NAME}").fetchall()[0][0]
        self.schema = connection.sql(f"SELECT * FROM {self.NAME} LIMIT 0").to_arrow_table().schema
        self.fetched = 0

    def all(self) -> pa.Table:
        return self.connection.sql(f"SELECT * FROM {self.NAME}").to_arrow_table()

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


# -- cells as text, in DuckDB ------------------------------------------------------------
def _timestamp_text(column: str, tz: str | None) -> str:
    """A timestamp as ``cell`` writes one: milliseconds, or microseconds when it has them; one
    with a time zone as the wall clock of its zone and the offset (+01:00)."""
    ts = f"timezone({string_literal(tz)}, {column})" if tz else f"CAST({column} AS TIMESTAMP)"
    text = (f"CASE WHEN epoch_us({ts}) % 1000 = 0 THEN strftime({ts}, '%Y-%m-%d %H:%M:%S.%g') "
            f"ELSE strftime({ts}, '%Y-%m-%d %H:%M:%S.%f') END")
    if not tz:
        return f"({text})"
    offset = f"CAST(epoch({ts}) - epoch({column}) AS BIGINT)"  # seconds east of UTC
    return (f"({text} || CASE WHEN {offset} < 0 THEN '-' ELSE '+' END || "
            f"lpad(CAST(abs({offset}) // 3600 AS VARCHAR), 2, '0') || ':' || "
            f"lpad(CAST(abs({offset}) % 3600 // 60 AS VARCHAR), 2, '0'))")


def _text(field: pa.Field, for_people: bool = True) -> str:
    """The SQL that spells a column's cells as the table, line and csv formats show them (NULL
    stays NULL): DuckDB's text of a value (a DOUBLE as Python's repr writes it, true/false),
    timestamps as ``cell`` writes them; ``for_people`` (not csv), SHOW JOBS's counts with
    thousands separators."""
    column = quote_ident(field.name)
    if for_people and (field.metadata or {}).get(b"weir.format") == b"thousands":
        return f"format('{{:,}}', {column})"
    if pa.types.is_timestamp(field.type):
        return _timestamp_text(column, field.type.tz)
    return f"CAST({column} AS VARCHAR)"


def _json_value(field: pa.Field) -> str:
    """The SQL of a column as JSON holds it: a timestamp as its text, anything else as it is."""
    column = quote_ident(field.name)
    return f"{_text(field)} AS {column}" if pa.types.is_timestamp(field.type) else column


def _csv_field(text: str) -> str:
    """A csv field as DuckDB's and psql's csv writers make one: NULL empty; quoted when it is
    empty or holds a comma, a quote or a line break, inner quotes doubled."""
    return (f"CASE WHEN {text} IS NULL THEN '' WHEN {text} = '' OR regexp_matches({text}, '[\",\\n\\r]') "
            f"THEN '\"' || replace({text}, '\"', '\"\"') || '\"' ELSE {text} END")


def _csv_header(name: str) -> str:
    if name == "" or any(c in name for c in ',"\n\r'):
        return '"' + name.replace('"', '""') + '"'
    return name


def _lines(texts: pa.Array, end: str = "\n") -> str:
    """Every string of ``texts`` followed by ``end``, as one text: the data buffer Arrow builds
    for the joined strings, decoded once (no Python string per row)."""
    joined = pc.binary_join_element_wise(texts, "", end)
    if isinstance(joined, pa.ChunkedArray):
        joined = joined.combine_chunks()
    if not (pa.types.is_string(joined.type) or pa.types.is_large_string(joined.type)):
        joined = joined.cast(pa.large_string())
    if len(joined) == 0:
        return ""
    offset_type = pa.int64() if pa.types.is_large_string(joined.type) else pa.int32()
    offsets = pa.Array.from_buffers(offset_type, len(joined) + 1, [None, joined.buffers()[1]], offset=joined.offset)
    start, stop = offsets[0].as_py(), offsets[-1].as_py()
    if stop == start:
        return ""
    return joined.buffers()[2].slice(start, stop - start).to_pybytes().decode()


# -- the formats -------------------------------------------------------------------------
def _count_line(shown: int, rows: int) -> str:
    line = f"({rows:,} row{'s' if rows != 1 else ''}"
    return line + (f", {shown:,} shown)" if shown < rows else ")")


def _shown_columns(schema: pa.Schema) -> list[str]:
    """The SQL of the cells the table, markdown and line formats show: text, NULL spelled NULL."""
    return [f"coalesce({_text(field)}, 'NULL') AS c{i}" for i, field in enumerate(schema)]


def shown_parts(answer, max_rows: int) -> tuple[list[pa.RecordBatch], int]:
    """The parts of ``answer`` a capped render shows, as text (NULL spelled NULL): all its rows
    when they are at most ``max_rows`` (0: no cap), else the first and the last ``max_rows // 2``."""
    columns = _shown_columns(answer.schema)

    def part(offset: int, count: int) -> pa.Table:
        batches = list(answer.text_batches(columns, offset, count))
        if batches:
            return pa.Table.from_batches(batches)
        return pa.table({f"c{i}": pa.array([], pa.string()) for i in range(len(columns))})

    if not max_rows or answer.rows <= max_rows:
        return [part(0, answer.rows)], answer.rows
    head = max_rows - max_rows // 2
    tail = max_rows // 2
    return [part(0, head), part(answer.rows - tail, tail)], head + tail


def render(result, fmt: str = "table", *, max_rows: int = 0, expanded: bool = False) -> str:
    """An answer (an Arrow table, or a ``DuckAnswer``) as text in one of ``FORMATS``, capped to
    ``max_rows`` (first and last rows and a count line: "(280,000 rows, 40 shown)") for the
    table, markdown and line formats; csv and json are always whole."""
    return "".join(write(result, fmt, max_rows=max_rows, expanded=expanded)).rstrip("\n")


def write(result, fmt: str = "table", *, max_rows: int = 0, expanded: bool = False) -> Iterator[str]:
    """``render``'s text in pieces, as it is made: a whole answer streams batch by batch (an
    uncapped table is aligned batch by batch, as psql's FETCH_COUNT does). DuckDB spells the
    cells and pyarrow.compute pads and joins them, a column at a time."""
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    answer = answer_of(result)
    try:
        yield from _pieces(answer, fmt, max_rows, expanded)
    finally:
        if answer is not result:  # made here for an Arrow table: its DuckDB connection goes
            answer.close()


def _pieces(answer, fmt: str, max_rows: int, expanded: bool) -> Iterator[str]:
    if not answer.schema.names:  # a statement's empty answer: no columns to show
        yield {"csv": "", "json": "[]\n"}.get(fmt, "\n\n" + _count_line(answer.rows, answer.rows) + "\n")
        return
    if fmt == "csv":
        yield from _csv(answer)
        return
    if fmt == "json":
        yield from _json(answer)
        return
    header = answer.schema.names
    numeric = [_numeric(t) for t in answer.schema.types]
    capped = bool(max_rows) and answer.rows > max_rows
    if capped or answer.rows <= BATCH_ROWS:
        parts, shown = shown_parts(answer, max_rows)
    else:
        parts, shown = answer.text_batches(_shown_columns(answer.schema)), answer.rows
    if expanded or fmt == "line":
        yield from _expanded(parts, header, answer.rows, shown, line_mode=not expanded)
        return
    if capped or answer.rows <= BATCH_ROWS:
        yield from _aligned(parts, header, numeric, fmt, capped)
    else:  # everything, batch by batch, each aligned on its own (psql's FETCH_COUNT)
        for index, part in enumerate(parts):
            yield from _aligned([part], header, numeric, fmt, False, header_line=index == 0)
    if fmt == "table" or shown < answer.rows:
        yield _count_line(shown, answer.rows) + "\n"


def _aligned(parts, header, numeric, fmt, gap, header_line=True) -> Iterator[str]:
    """Rows (parts of text columns) as aligned text; numbers to the right; a row of … between
    the parts when rows were left out (``gap``)."""
    widths = [max([len(h), *(pc.max(pc.utf8_length(part.column(i))).as_py() or 0 for part in parts)])
              for i, h in enumerate(header)]

    def pad(texts, width: int, number: bool):
        return pc.utf8_lpad(texts, width=width) if number else pc.utf8_rpad(texts, width=width)

    def line(cells: list[str]) -> str:  # the header, the gap: as ``lines`` makes the rows
        text = " | ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric))
        return f"| {text} |" if fmt == "markdown" else text.rstrip()

    def lines(part) -> pa.Array:
        joined = pc.binary_join_element_wise(
            *(pad(part.column(i), w, n) for i, (w, n) in enumerate(zip(widths, numeric))), " | ")
        return pc.binary_join_element_wise("| ", joined, " |", "") if fmt == "markdown" \
            else pc.utf8_rtrim_whitespace(joined)

    if fmt == "markdown":
        rule = "|" + "|".join(("-" * (w + 1) + ":") if n else ("-" * (w + 2)) for w, n in zip(widths, numeric)) + "|"
    else:
        rule = "-+-".join("-" * w for w in widths)
    if header_line:
        yield line(header) + "\n" + rule + "\n"
    for index, part in enumerate(parts):
        if index and gap:
            yield line(["…"] * len(header)) + "\n"
        yield _lines(lines(part))


def _expanded(parts, header, rows, shown, line_mode) -> Iterator[str]:
    """psql's expanded display (`\\x`): one block per row, a column a line; or the DuckDB CLI's
    `.mode line` (``line_mode``): `name = value` lines, a blank line between rows."""
    width = max((len(h) for h in header), default=0)
    number = 0  # rows before this part
    for index, part in enumerate(parts):
        if index and shown < rows:
            number = rows - part.num_rows
            yield "…\n"
        if not part.num_rows:
            continue
        if line_mode:  # a blank line before every row but the first
            before = pa.concat_arrays([pa.array(["" if number == 0 else "\n"]),
                                       pa.repeat(pa.scalar("\n"), part.num_rows - 1)])
            pieces = [before]
            for i, name in enumerate(header):
                pieces += [f"{name.rjust(width)} = ", part.column(i), "\n"]
        else:
            numbers = pa.array(range(number + 1, number + part.num_rows + 1), pa.int64()).cast(pa.string())
            pieces = ["-[ RECORD ", numbers, " ]\n"]
            for i, name in enumerate(header):
                pieces += [f"{name.ljust(width)} | ", part.column(i), "\n"]
        yield _lines(pc.binary_join_element_wise(*pieces, ""), "")
        number += part.num_rows
    yield _count_line(shown, rows) + "\n"


def _csv(answer) -> Iterator[str]:
    """The DuckDB CLI's `.mode csv` (psql's `\\pset format csv`): a header line, then every row;
    each row's line is made by DuckDB."""
    yield ",".join(_csv_header(name) for name in answer.schema.names) + "\n"
    texts = [f"{_text(field, for_people=False)} AS c{i}" for i, field in enumerate(answer.schema)]
    row = " || ',' || ".join(_csv_field(f"c{i}") for i in range(len(texts)))
    inner = f"(SELECT {', '.join(texts)} FROM {answer.NAME})"
    for batch in answer.batches_of(f"SELECT {row} FROM {inner}"):
        yield _lines(batch.column(0))


def _json(answer) -> Iterator[str]:
    """The DuckDB CLI's `.mode json`: an array of objects, one row a line, each made by DuckDB's
    ``to_json`` (timestamps as the other formats write them)."""
    values = ", ".join(_json_value(field) for field in answer.schema)
    before = "["
    for batch in answer.batches_of(f"SELECT to_json(r) FROM (SELECT {values} FROM {answer.NAME}) r"):
        text = _lines(batch.column(0), ",\n")
        if text:
            yield before + text[:-2]
            before = ",\n"
    yield ("]\n" if before != "[" else "[]\n")


def table(result: pa.Table) -> str:
    return render(result, "table")


def csv_text(result: pa.Table) -> str:
    return render(result, "csv")


def json_text(result: pa.Table) -> str:
    return render(result, "json")

"""Rendering for people: errors with a caret, aligned tables, the progress line, the summary."""
from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone

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


def table(result: pa.Table) -> str:
    rows = [[cell(v) for v in row.values()] for row in result.to_pylist()]
    header = result.column_names
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
               for t in result.schema.types]

    def line(cells):
        return " | ".join(c.rjust(w) if n else c.ljust(w) for c, w, n in zip(cells, widths, numeric)).rstrip()

    out = [line(header), "-+-".join("-" * w for w in widths)]
    out.extend(line(r) for r in rows)
    out.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(out)


def csv_text(result: pa.Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(result.column_names)
    for row in result.to_pylist():
        writer.writerow(["" if v is None else cell(v) for v in row.values()])
    return buffer.getvalue().rstrip("\n")


def json_text(result: pa.Table) -> str:
    return json.dumps(result.to_pylist(), default=cell, indent=None)

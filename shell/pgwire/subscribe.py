"""``SUBSCRIBE``: a view's committed changes over a Postgres connection.

The changes come from ``Connection.subscribe``'s machinery (``shell/api.py``:
wait for the view's job to complete a checkpoint, read the committed rows,
diff them with the previous read); only the read goes through the endpoint's
``ResultReader``, and for ``SUBSCRIBE (SELECT ...)`` it reads the query rather
than the whole view, so the diff is of the query's answer. Each row goes out
as ``checkpoint_id`` (the latest checkpoint of the view's job that the read
followed; NULL before its first checkpoint, or when no job of this process
maintains the view), ``op`` (+I, -U, +U or -D, as ``Connection.subscribe`` gives them), then the columns.

A view whose job runs in this process is read again as soon as that job reports a
completed checkpoint (published before it is reported). A view written by another
process (``weir serve`` beside a ``weir run``) is read again when the file at the
database's path is another one (a publish renames a new file there), looked at
every ``STAT_INTERVAL`` seconds: one ``stat``, no read, between publishes.
"""
from __future__ import annotations

import time

import pyarrow as pa
from sqlglot import exp

from weir.shell.api import Connection, Subscription
from weir.shell.database import _stamp
from weir.shell.pgwire.results import ResultReader
from weir.sql.errors import Problem, WeirSqlError

PREFIX = [("checkpoint_id", "BIGINT"), ("op", "VARCHAR")]

#: How often a subscription to a view written by another process looks for a new snapshot.
STAT_INTERVAL = 0.005


class QuerySubscription(Subscription):
    """``Subscription`` whose reads are a query's answer, through the endpoint's reader."""

    def __init__(self, connection: Connection, view: str, query: str, reader: ResultReader, interval: float):
        job = connection.session.maintainers.get(view.lower())
        super().__init__(connection, view, job, interval)
        self.query = query
        self.reader = reader
        self._read_stamp = None  # the file at the path when the last read began

    def _wait_for_commit(self) -> bool:
        if self._job is not None:
            return super()._wait_for_commit()
        while not self._closed:
            if _stamp(self.reader.latest.path) != self._read_stamp:
                return True
            time.sleep(STAT_INTERVAL)
        return False

    def _read(self) -> pa.Table:
        # Taken before the read: a publish during it gives a newer read and one more (empty) diff.
        self._read_stamp = _stamp(self.reader.latest.path)
        with self.reader.cursor() as cursor:
            table = cursor.sql(self.query).to_arrow_table()
        if self._seen is None and self._job is not None:
            self._seen = self._job.metrics.last_checkpoint
        return table

    @property
    def checkpoint_id(self) -> int | None:
        """The checkpoint the latest changes follow (None before the first or without a job here)."""
        seen = self._seen
        if seen == ("end",) and self._job is not None:
            seen = self._job.metrics.last_checkpoint
        return int(seen) if isinstance(seen, str) and seen.isdigit() else None

    def rows(self, batch: pa.RecordBatch) -> list[tuple]:
        """The changes of one batch as rows: checkpoint id, op, columns."""
        checkpoint = self.checkpoint_id
        columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
        return [(checkpoint, *row) for row in zip(*columns)]


def subscription_target(sql: str) -> tuple[str, str]:
    """(the view whose commits to follow, the query to read) of ``SUBSCRIBE [TO] view`` or
    ``SUBSCRIBE (SELECT ...)``, given without the word SUBSCRIBE."""
    text = sql.strip()
    if text.startswith("("):
        depth, end = 0, None
        for i, c in enumerate(text):
            depth += c == "("
            depth -= c == ")"
            if depth == 0:
                end = i
                break
        if end is None:
            raise _problem("SUBSCRIBE (query ...) lacks its closing parenthesis")
        query = text[1:end].strip()
        try:
            tables = [t.name for t in exp.maybe_parse(query, dialect="duckdb").find_all(exp.Table)]
        except Exception:  # noqa: BLE001 - DuckDB reports the query's own error when it runs
            tables = []
        if not tables:
            raise _problem("SUBSCRIBE (query) needs a query over a materialized view")
        return tables[0], query
    words = text.split()
    if words and words[0].lower() == "to":
        words = words[1:]
    if len(words) != 1:
        raise _problem("SUBSCRIBE takes one view: SUBSCRIBE TO view, or SUBSCRIBE (SELECT ... FROM view)")
    name = words[0]
    plain = name[1:-1].replace('""', '"') if name.startswith('"') and name.endswith('"') else name
    # Every column but `_row_kind`: an updating view's table, created before its job's first
    # commit, carries the sink's row-kind column until that commit recreates it without.
    return plain, "SELECT COLUMNS(lambda c: c <> '_row_kind') FROM \"" + plain.replace('"', '""') + '"'


def _problem(message: str) -> WeirSqlError:
    return WeirSqlError(Problem(message, None, None, "e.g. SUBSCRIBE TO channel_minutes"))


def copy_inner(sql: str) -> str:
    """The SUBSCRIBE inside ``COPY (SUBSCRIBE ...) TO STDOUT [WITH (...)]``, without its word."""
    text = sql.strip()
    start = text.index("(")
    depth = 0
    for i in range(start, len(text)):
        depth += text[i] == "("
        depth -= text[i] == ")"
        if depth == 0:
            inner, rest = text[start + 1:i].strip(), text[i + 1:].strip().lower()
            break
    else:
        raise _problem("COPY (SUBSCRIBE ...) lacks its closing parenthesis")
    if not rest.startswith("to stdout"):
        raise _problem("COPY (SUBSCRIBE ...) writes only TO STDOUT")
    if "binary" in rest or "csv" in rest:
        raise _problem("COPY (SUBSCRIBE ...) TO STDOUT writes the text format only")
    return inner.split(None, 1)[1] if len(inner.split(None, 1)) > 1 else ""


def copy_line(values: list[str | None]) -> bytes:
    """One row in COPY's text format: tab between fields, \\N for NULL, backslash escapes."""
    fields = ["\\N" if v is None else v.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
              .replace("\r", "\\r") for v in values]
    return ("\t".join(fields) + "\n").encode()

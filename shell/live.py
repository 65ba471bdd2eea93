"""A live result: the rows of a streaming SELECT, collected as its job produces them.

The planner plans a bare SELECT into a `print` sink; the shell swaps that
sink for ``LiveResultSink`` (registered in the engine's connector registry
under ``RESULT_CONNECTOR``), which hands every batch to a ``LiveResult`` in
this process. The views in ``shell/live_view.py`` read it from the main
thread while the job's thread writes.

The result of an updating query (a GROUP BY without a window) is a changelog:
its batches carry ``_row_kind``. The changelog and tableau views show each
change with its kind (+I, -U, +U, -D); the table view shows the rows the
changes leave, applied as they arrive (``current_rows``).

Memory stays bounded: the table and changelog views keep the latest
``max_rows`` rows (an updating result keeps its current rows, as many as the
result has); the tableau view reads rows as they come and holds the job
back (the sink waits) while it is ``max_pending`` rows behind.
"""
from __future__ import annotations

import dataclasses
import itertools
import threading
from collections import deque
from typing import Any

import pyarrow as pa

from weir.engine.changelog import ROW_KIND, SHORT_NAMES
from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Sink
from weir.engine.connectors.registry import register_connector
from weir.engine.graph import JobGraph
from weir.engine.operators.registry import operator_class
from weir.shell.current_rows import CurrentRows
from weir.shell.render import cell

RESULT_CONNECTOR = "weir-shell-result"
MAX_ROWS = 100_000
#: The kind of every row of an append-only result.
INSERT = SHORT_NAMES[0]

_results: dict[str, "_SinkTarget"] = {}
_ids = itertools.count(1)


class _SinkTarget:
    """What a job's result sink writes into, in this process (found in ``_results`` by its
    id): the job's thread puts rows in (``add``, then ``end``); the reader takes them and
    ``close``s it, after which what still comes is dropped."""

    def __init__(self, schema: pa.Schema):
        self.id = f"live-{next(_ids)}"
        self.schema = schema
        self.ended = False  # the job's sink finished: no more rows
        self.closed = False  # the reader left: drop what still comes
        self._changed = threading.Condition()
        _results[self.id] = self

    def end(self) -> None:
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._let_go()
            self._changed.notify_all()
        _results.pop(self.id, None)

    def _let_go(self) -> None:
        """What closing drops (nothing: a live view may still show what it has)."""


class LiveResult(_SinkTarget):
    def __init__(self, schema: pa.Schema, *, max_rows: int = MAX_ROWS, max_pending: int | None = None):
        super().__init__(schema)
        #: An updating result's batches end with the row kind; it is shown apart.
        self.updating = ROW_KIND in schema.names
        self.names = [n for n in schema.names if n != ROW_KIND]
        #: An updating result's rows, as its changes leave them (in DuckDB: ``shell/current_rows.py``).
        self._current = CurrentRows(schema) if self.updating else None
        self.max_rows = max_rows
        self.max_pending = max_pending
        self.received = 0  # rows received so far
        self.first = 0  # absolute number of the oldest row kept
        self.read_to = 0  # how far the tableau view has read
        self._batches: deque[tuple[int, pa.RecordBatch]] = deque()  # (absolute number of first row, batch)

    # -- the job's side ---------------------------------------------------------
    def add(self, batch: pa.RecordBatch) -> None:
        with self._changed:
            while self.max_pending is not None and not self.closed and self.received - self.read_to >= self.max_pending:
                self._changed.wait(0.1)
            if self.closed or batch.num_rows == 0:
                return
            if self.updating:
                self._current.apply(batch, self.received)
            self._batches.append((self.received, batch))
            self.received += batch.num_rows
            while self._batches and self.received - (self._batches[0][0] + self._batches[0][1].num_rows) >= self.max_rows:
                self._batches.popleft()
            self.first = self._batches[0][0] if self._batches else self.received
            self._changed.notify_all()

    # -- the viewer's side ------------------------------------------------------
    def rows(self, start: int, stop: int) -> list[list[str]]:
        """Rows ``start`` to ``stop`` (absolute numbers, as far as kept), as text cells."""
        return [row[1:] for row in self.changes(start, stop)]

    def changes(self, start: int, stop: int) -> list[list[str]]:
        """Like ``rows``, each row led by its kind: '+I', '-U', '+U' or '-D'."""
        with self._changed:
            batches = list(self._batches)
        out = []
        for first, batch in batches:
            last = first + batch.num_rows
            if last <= start or first >= stop:
                continue
            lo, hi = max(start, first) - first, min(stop, last) - first
            part = batch.slice(lo, hi - lo)
            if self.updating:
                kinds = [SHORT_NAMES[k] for k in part.column(ROW_KIND).to_pylist()]
                part = part.drop_columns([ROW_KIND])
            else:
                kinds = [INSERT] * part.num_rows
            out.extend([kind, *row] for kind, row in zip(kinds, _cells(part)))
        return out

    def current_count(self) -> int:
        """How many rows the table view has: the current rows of an updating result."""
        with self._changed:
            return self._current.count if self.updating else self.received

    def current_rows(self, start: int, stop: int) -> list[list[str]]:
        """The table view's rows ``start`` to ``stop``: of an updating result, the rows its
        changes leave (in the order they came: ``CurrentRows``); else the rows as received."""
        if not self.updating:
            return self.rows(start, stop)
        return _cells(self._current.page(start, stop))

    def wait_for_rows(self, timeout: float) -> tuple[list[list[str]], bool]:
        """New rows since the last call (for the tableau view), and whether the result has ended."""
        with self._changed:
            if self.read_to >= self.received and not self.ended:
                self._changed.wait(timeout)
            start, stop, ended = max(self.read_to, self.first), self.received, self.ended
        rows = self.changes(start, stop)
        with self._changed:
            self.read_to = stop
            self._changed.notify_all()
        return rows, ended and stop == self.received


class BatchQueue(_SinkTarget):
    """The batches of a streaming query for ``Connection.stream``, as Arrow: the job's sink
    puts them in, the reader takes them out in order. The sink waits while ``max_batches``
    are unread (so a slow reader holds the job back instead of filling memory), and drops
    what still comes once the reader has closed the queue."""

    def __init__(self, schema: pa.Schema, *, max_batches: int = 16):
        super().__init__(schema)
        self.max_batches = max_batches
        self._batches: deque[pa.RecordBatch] = deque()

    def add(self, batch: pa.RecordBatch) -> None:
        with self._changed:
            while not self.closed and len(self._batches) >= self.max_batches:
                self._changed.wait(0.1)
            if self.closed or batch.num_rows == 0:
                return
            self._batches.append(batch)
            self._changed.notify_all()

    def _let_go(self) -> None:
        self._batches.clear()

    def take(self, timeout: float) -> pa.RecordBatch | None:
        """The next batch, or None if none came within ``timeout`` seconds or the result ended."""
        with self._changed:
            if not self._batches and not self.ended and not self.closed:
                self._changed.wait(timeout)
            if not self._batches:
                return None
            batch = self._batches.popleft()
            self._changed.notify_all()
            return batch

    @property
    def drained(self) -> bool:
        """The job's sink finished and every batch has been taken."""
        with self._changed:
            return self.ended and not self._batches


def _cells(batch: pa.RecordBatch) -> list[list[str]]:
    return [[cell(v) for v in row.values()] for row in batch.to_pylist()]


class LiveResultSink(Sink):
    """Hands batches to the LiveResult named by the 'result-id' option."""

    transactional = False

    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        self.result = _results[options["result-id"]]

    def write(self, batch: pa.RecordBatch) -> None:
        self.result.add(batch)

    def finish(self) -> None:
        self.result.end()


SPEC = ConnectorSpec(
    name=RESULT_CONNECTOR,
    source=None,
    sink=LiveResultSink,
    options={"result-id": OptionSpec("the shell's live result to fill", required=True)},
)


def register() -> None:
    """Make the live result sink known to the engine's connector registry."""
    register_connector(SPEC)


def redirect_to(graph: JobGraph, result: LiveResult | BatchQueue) -> None:
    """Send the rows of a planned SELECT (a `print` sink) to ``result`` instead."""
    register()
    for node in graph.nodes:
        if operator_class(node.kind).commits_output:
            node.config = dataclasses.replace(node.typed_config(), options={"connector": RESULT_CONNECTOR, "result-id": result.id})

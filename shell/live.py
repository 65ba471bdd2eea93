"""A live result: the rows of a streaming SELECT, collected as its job produces them.

The planner plans a bare SELECT into a `print` sink; the shell swaps that
sink for ``LiveResultSink`` (registered in the engine's connector registry
under ``RESULT_CONNECTOR``), which hands every batch to a ``LiveResult`` in
this process. The views in ``shell/live_view.py`` read it from the main
thread while the job's thread writes.

Memory stays bounded: the table and changelog views keep the latest
``max_rows`` rows; the tableau view reads rows as they come and holds the job
back (the sink waits) while it is ``max_pending`` rows behind.
"""
from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Any

import pyarrow as pa

from engine.connectors.base import ConnectorSpec, OptionSpec, Sink
from engine.connectors.registry import CONNECTORS
from engine.graph import JobGraph
from shell.render import cell

RESULT_CONNECTOR = "weir-shell-result"
MAX_ROWS = 100_000
#: Every row kind is +I until the planner produces updating streams.
INSERT = "+I"

_results: dict[str, "LiveResult"] = {}
_ids = itertools.count(1)


class LiveResult:
    def __init__(self, schema: pa.Schema, *, max_rows: int = MAX_ROWS, max_pending: int | None = None):
        self.id = f"live-{next(_ids)}"
        self.schema = schema
        self.max_rows = max_rows
        self.max_pending = max_pending
        self.received = 0  # rows received so far
        self.first = 0  # absolute number of the oldest row kept
        self.read_to = 0  # how far the tableau view has read
        self.ended = False  # the job's sink finished: no more rows
        self.closed = False  # the viewer left: drop what still comes
        self._batches: deque[tuple[int, pa.RecordBatch]] = deque()  # (absolute number of first row, batch)
        self._changed = threading.Condition()
        _results[self.id] = self

    # -- the job's side ---------------------------------------------------------
    def add(self, batch: pa.RecordBatch) -> None:
        with self._changed:
            while self.max_pending is not None and not self.closed and self.received - self.read_to >= self.max_pending:
                self._changed.wait(0.1)
            if self.closed or batch.num_rows == 0:
                return
            self._batches.append((self.received, batch))
            self.received += batch.num_rows
            while self._batches and self.received - (self._batches[0][0] + self._batches[0][1].num_rows) >= self.max_rows:
                self._batches.popleft()
            self.first = self._batches[0][0] if self._batches else self.received
            self._changed.notify_all()

    def end(self) -> None:
        with self._changed:
            self.ended = True
            self._changed.notify_all()

    # -- the viewer's side ------------------------------------------------------
    def close(self) -> None:
        with self._changed:
            self.closed = True
            self._changed.notify_all()
        _results.pop(self.id, None)

    def rows(self, start: int, stop: int) -> list[list[str]]:
        """Rows ``start`` to ``stop`` (absolute numbers, as far as kept), as text cells."""
        with self._changed:
            batches = list(self._batches)
        out = []
        for first, batch in batches:
            last = first + batch.num_rows
            if last <= start or first >= stop:
                continue
            lo, hi = max(start, first) - first, min(stop, last) - first
            for row in batch.slice(lo, hi - lo).to_pylist():
                out.append([cell(v) for v in row.values()])
        return out

    def wait_for_rows(self, timeout: float) -> tuple[list[list[str]], bool]:
        """New rows since the last call (for the tableau view), and whether the result has ended."""
        with self._changed:
            if self.read_to >= self.received and not self.ended:
                self._changed.wait(timeout)
            start, stop, ended = max(self.read_to, self.first), self.received, self.ended
        rows = self.rows(start, stop)
        with self._changed:
            self.read_to = stop
            self._changed.notify_all()
        return rows, ended and stop == self.received


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
    """Make the live result sink known to the engine (the registry has no
    public registration yet, so the shell adds its spec to ``CONNECTORS``)."""
    CONNECTORS.setdefault(RESULT_CONNECTOR, SPEC)


def redirect_to(graph: JobGraph, result: LiveResult) -> None:
    """Send the rows of a planned SELECT (a `print` sink) to ``result`` instead."""
    register()
    for node in graph.nodes:
        if node.kind == "sink":
            node.config["options"] = {"connector": RESULT_CONNECTOR, "result-id": result.id}

"""Runs a JobGraph in this process, pushing batches through the DAG.

Sources are read round-robin, one batch at a time. Each batch goes depth
first through its consumers; a watermark follows the batches it covers.
An operator with several inputs sees the minimum of their watermarks.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from engine.connectors.registry import create_sink, create_source
from engine.errors import EngineError, JobCancelled
from engine.graph import JobGraph, OperatorNode
from engine.messages import MIN_WATERMARK, Watermark
from engine.operators.base import Operator, OperatorContext
from engine.operators.registry import build_operator
from engine.runtime.sink_writer import SinkWriter
from engine.runtime.source_reader import SourceReader


@dataclass
class OperatorMetrics:
    id: str
    kind: str
    rows_in: int = 0
    rows_out: int = 0
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class Progress:
    rows_read: int
    elapsed: float
    watermark: int  # µs; MIN_WATERMARK before the first

    @property
    def rate(self) -> float:
        return self.rows_read / self.elapsed if self.elapsed > 0 else 0.0


@dataclass
class JobResult:
    name: str
    operators: list[OperatorMetrics]
    rows_read: int
    elapsed: float

    @property
    def events_per_second(self) -> float:
        return self.rows_read / self.elapsed if self.elapsed > 0 else 0.0

    def counter(self, name: str) -> int:
        return sum(m.counters.get(name, 0) for m in self.operators)


class _Task:
    """One operator and what it needs to run: its metrics and input watermarks."""

    def __init__(self, node: OperatorNode, ctx: OperatorContext, operator: Operator | None,
                 reader: SourceReader | None):
        self.node = node
        self.ctx = ctx
        self.operator = operator
        self.reader = reader
        self.metrics = OperatorMetrics(node.id, node.kind)
        self.input_watermarks = [MIN_WATERMARK] * max(1, len(node.inputs))
        self.watermark = MIN_WATERMARK
        self.consumers: list[tuple[_Task, int]] = []


class LocalExecutor:
    def __init__(
        self,
        graph: JobGraph,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        progress_interval: float = 0.5,
    ):
        self.graph = graph
        self.on_progress = on_progress
        self.progress_interval = progress_interval
        self.tasks: dict[str, _Task] = {}
        self._cancelled = threading.Event()
        self._started = time.perf_counter()

    def cancel(self) -> None:
        """Stop the job at the next batch boundary; ``run`` raises JobCancelled and
        nothing uncommitted becomes visible. Safe to call from another thread."""
        self._cancelled.set()

    # -- setup ---------------------------------------------------------------
    def _build(self) -> None:
        for node in self.graph.nodes:
            ctx = OperatorContext(operator_id=node.id, output_schema=node.output_schema)
            operator, reader = self._call_for(node, self._instantiate, node, ctx)
            self.tasks[node.id] = _Task(node, ctx, operator, reader)
        for task in self.tasks.values():
            for index, edge in enumerate(task.node.inputs):
                self.tasks[edge.source].consumers.append((task, index))

    @staticmethod
    def _instantiate(node: OperatorNode, ctx: OperatorContext) -> tuple[Operator | None, SourceReader | None]:
        if node.kind == "source":
            source = create_source(node.config["options"], node.output_schema, **_batch_size(node))
            return None, SourceReader(source, node.config.get("watermark"))
        if node.kind == "sink":
            return SinkWriter(create_sink(node.config["options"], node.output_schema), ctx), None
        return build_operator(node.kind, node.config, ctx), None

    # -- data flow -----------------------------------------------------------
    def _emit(self, task: _Task, batches: list[pa.RecordBatch]) -> None:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            task.metrics.rows_out += batch.num_rows
            for consumer, index in task.consumers:
                consumer.metrics.rows_in += batch.num_rows
                out = self._call(consumer, consumer.operator.process_batch, batch, index)
                self._emit(consumer, out)

    def _advance(self, task: _Task, index: int, watermark: int) -> None:
        task.input_watermarks[index] = max(task.input_watermarks[index], watermark)
        combined = min(task.input_watermarks)
        if combined <= task.watermark:
            return
        task.watermark = combined
        if task.operator is not None:
            self._emit(task, self._call(task, task.operator.process_watermark, combined))
        for consumer, consumer_index in task.consumers:
            self._advance(consumer, consumer_index, combined)

    def _call(self, task: _Task, method, *args):
        return self._call_for(task.node, method, *args)

    @staticmethod
    def _call_for(node: OperatorNode, method, *args):
        """Call into an operator, naming it in any error."""
        try:
            return method(*args)
        except EngineError as error:
            error.operator_id = error.operator_id or node.id
            raise
        except Exception as error:  # an operator bug or a DuckDB error in generated SQL
            raise EngineError(f"{node.kind} failed: {error}", operator_id=node.id) from error

    # -- the job ---------------------------------------------------------------
    def run(self) -> JobResult:
        self._build()
        started = self._started = time.perf_counter()
        operators = [t for t in self.tasks.values() if t.operator is not None]
        try:
            for task in operators:
                self._call(task, task.operator.open)
            self._read_sources(started)
            for task in operators:  # topological order: upstream finishes first
                self._emit(task, self._call(task, task.operator.finish))
        finally:
            for task in operators:
                task.operator.close()
        return self._result(time.perf_counter() - started)

    def _read_sources(self, started: float) -> None:
        streams = {t.node.id: iter(t.reader) for t in self.tasks.values() if t.reader}
        next_report = started + self.progress_interval
        while streams:
            if self._cancelled.is_set():
                raise JobCancelled(f"job {self.graph.name} was cancelled")
            for node_id in list(streams):
                task = self.tasks[node_id]
                item = self._call(task, next, streams[node_id], None)
                if item is None:
                    del streams[node_id]
                elif isinstance(item, Watermark):
                    self._advance(task, 0, item.timestamp)
                else:
                    self._emit(task, [item])
            if self.on_progress and time.perf_counter() >= next_report:
                self.on_progress(self.progress(started))
                next_report = time.perf_counter() + self.progress_interval

    def progress(self, started: float | None = None) -> Progress:
        """Rows read, elapsed time and watermark so far; safe to call from another thread."""
        started = self._started if started is None else started
        readers = [t for t in self.tasks.values() if t.reader]
        return Progress(
            rows_read=sum(t.reader.rows_read for t in readers),
            elapsed=time.perf_counter() - started,
            watermark=min((t.watermark for t in readers), default=MIN_WATERMARK),
        )

    def _result(self, elapsed: float) -> JobResult:
        metrics = []
        for task in self.tasks.values():
            counters = dict(task.ctx.metrics)
            counters.pop("rows_in", None)
            counters.pop("rows_out", None)
            if task.reader is not None:
                task.metrics.rows_out = task.reader.rows_read
                if task.reader.source.skipped_rows:
                    counters["malformed_rows_skipped"] = task.reader.source.skipped_rows
            task.metrics.counters = counters
            metrics.append(task.metrics)
        rows_read = sum(t.reader.rows_read for t in self.tasks.values() if t.reader)
        return JobResult(self.graph.name, metrics, rows_read, elapsed)


def _batch_size(node: OperatorNode) -> dict:
    size = node.config.get("batch_size")
    return {"batch_size": int(size)} if size else {}

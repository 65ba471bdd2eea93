"""Runs a JobGraph in this process, pushing batches through the DAG.

Sources are read round-robin, one batch at a time. Each batch goes depth
first through its consumers; a watermark follows the batches it covers.
An operator with several inputs sees the minimum of their watermarks.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from engine.connectors.options import parse_duration_seconds
from engine.connectors.registry import create_sink, create_source
from engine.errors import EngineError, JobCancelled
from engine.graph import LATE_ROWS_PORT, JobGraph, OperatorNode
from engine.messages import MIN_WATERMARK
from engine.operators.base import Operator, OperatorContext, late_counter
from engine.operators.registry import build_operator
from engine import faults
from engine.checkpoint.coordinator import CheckpointConfig, CheckpointEvent, Coordinator, RestorePoint
from engine.runtime.control import ControlChannel
from engine.runtime.sink_writer import SinkWriter
from engine.runtime.source_reader import SourceReader
from engine.watermarks import for_operator


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
    #: Checkpoints and savepoints completed during the run, in order.
    checkpoints: list[CheckpointEvent] = field(default_factory=list)
    #: The savepoint the job was stopped with (`weir stop --savepoint`), if it was.
    stopped_with: CheckpointEvent | None = None
    #: True when the run only finished committing a previous run's final output.
    already_finished: bool = False

    @property
    def events_per_second(self) -> float:
        return self.rows_read / self.elapsed if self.elapsed > 0 else 0.0

    def counter(self, name: str) -> int:
        return sum(m.counters.get(name, 0) for m in self.operators)

    def late_rows_by_source(self) -> dict[str, int]:
        """Rows dropped as late, per source table ('a+b' for rows of a join of a and b)."""
        prefix, _ = late_counter("").split("[")
        totals: dict[str, int] = {}
        for m in self.operators:
            for name, value in m.counters.items():
                if name.startswith(prefix + "[") and name.endswith("]"):
                    source = name[len(prefix) + 1:-1]
                    totals[source] = totals.get(source, 0) + value
        return dict(sorted(totals.items()))


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
        checkpoints: CheckpointConfig | None = None,
        on_checkpoint: Callable[[CheckpointEvent], None] | None = None,
        warn: Callable[[str], None] = lambda message: None,
        control: ControlChannel | None = None,
        state_backend: str = "duckdb",
        spill_dir: str | None = None,
        subtask: int = 0,
        parallelism: int = 1,
        sinks_prepared: bool = False,
    ):
        self.graph = graph
        self.checkpoints = checkpoints
        self.on_checkpoint = on_checkpoint
        self.warn = warn
        self.control = control
        self.state_backend = state_backend
        self.spill_dir = spill_dir
        #: Made from ``checkpoints`` when the job runs (a parallel worker has none: see subtask.py).
        self.coordinator = None
        self.subtask = subtask
        self.parallelism = parallelism
        #: The sinks were readied by another process (the parallel coordinator): keep their output.
        self.sinks_prepared = sinks_prepared
        #: Source steps read so far.
        self.step = 0
        #: Sink id -> handles pre-committed and not yet committed.
        self.uncommitted: dict[str, list] = {}
        #: Why the job stopped early, if it did: 'stopped with savepoint ...'.
        self.stopped_with: CheckpointEvent | None = None
        self._stop_requested = False
        self._already_finished = False
        self.on_progress = on_progress
        self.progress_interval = progress_interval
        self.tasks: dict[str, _Task] = {}
        self._cancelled = threading.Event()
        self._started = time.perf_counter()
        #: Savepoints asked for from another thread: (path, callback), taken at the next boundary.
        self._savepoint_requests: list = []

    def cancel(self) -> None:
        """Stop the job at the next batch boundary; ``run`` raises JobCancelled and
        nothing uncommitted becomes visible. Safe to call from another thread."""
        self._cancelled.set()

    def savepoint(self, path: Path | None = None, *, stop: bool = False, timeout: float = 300.0) -> CheckpointEvent:
        """Take a savepoint at the next batch boundary (and stop the job, with ``stop``);
        returns it once it is complete. Call from another thread than the one running the job."""
        if self.checkpoints is None and self.coordinator is None:
            raise EngineError(f"job {self.graph.name} runs without a state directory, so it cannot take savepoints",
                              hint="run it with checkpoints configured (weir run, or the shell)")
        done = threading.Event()
        events: list[CheckpointEvent] = []

        def completed(event: CheckpointEvent) -> None:
            events.append(event)
            if stop:
                self.stopped_with = event
                self._stop_requested = True
            done.set()

        self._savepoint_requests.append((path, completed))
        if not done.wait(timeout):
            raise EngineError(f"job {self.graph.name} took no savepoint within {timeout:.0f} s",
                              hint="a savepoint is taken between two batches; is the job stuck or finished?")
        return events[0]

    def stop_with_savepoint(self, path: Path | None = None, timeout: float = 300.0) -> Path:
        return self.savepoint(path, stop=True, timeout=timeout).path

    # -- setup ---------------------------------------------------------------
    def _build(self) -> None:
        for node in self.graph.nodes:
            ctx = OperatorContext(operator_id=node.id, output_schema=node.output_schema,
                                  max_parallelism=int(self.graph.settings.get("pipeline.max-parallelism", 128)),
                                  state_backend=self.state_backend, spill_dir=self.spill_dir,
                                  subtask_index=self.subtask, parallelism=self.parallelism,
                                  input_sources=["+".join(self.graph.source_tables(e.source)) for e in node.inputs])
            operator, reader = self._call_for(node, self._instantiate, node, ctx)
            self.tasks[node.id] = _Task(node, ctx, operator, reader)
        for task in self.tasks.values():
            for index, edge in enumerate(task.node.inputs):
                self.tasks[edge.source].consumers.append((task, index))
        for task in self.tasks.values():
            if task.node.kind == "sink":
                task.operator.resuming = self.sinks_prepared

    @staticmethod
    def _instantiate(node: OperatorNode, ctx: OperatorContext) -> tuple[Operator | None, SourceReader | None]:
        if node.kind == "source":
            source = create_source(node.config["options"], node.output_schema, **_batch_size(node))
            bounded = node.config.get("watermark_bounded")
            idle = node.config["options"].get("source.idle-timeout") or node.config.get("idle_timeout")
            return None, SourceReader(source, node.config.get("watermark"), bounded=tuple(bounded) if bounded else None,
                                      idle_timeout=parse_duration_seconds("source.idle-timeout", idle) if idle else None,
                                      subtask=ctx.subtask_index, parallelism=ctx.parallelism)
        if node.kind == "sink":
            sink = create_sink(node.config["options"], node.output_schema, subtask_index=ctx.subtask_index)
            return SinkWriter(sink, ctx), None
        return build_operator(node.kind, node.config, ctx), None

    # -- data flow -----------------------------------------------------------
    def _emit(self, task: _Task, batches: list[pa.RecordBatch], port: int = 0) -> None:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if port == 0:
                task.metrics.rows_out += batch.num_rows
            for consumer, index in task.consumers:
                if consumer.node.inputs[index].port != port:
                    continue
                consumer.metrics.rows_in += batch.num_rows
                out = self._call(consumer, consumer.operator.process_batch, for_operator(consumer.operator, batch), index)
                self._emit(consumer, out)

    def _advance(self, task: _Task, index: int, watermark: int) -> None:
        task.input_watermarks[index] = max(task.input_watermarks[index], watermark)
        combined = min(task.input_watermarks)
        if combined <= task.watermark:
            return
        task.watermark = combined
        forwarded = combined
        if task.operator is not None:
            self._emit(task, self._call(task, task.operator.process_watermark, combined))
            forwarded = task.operator.output_watermark(combined)
        for consumer, consumer_index in task.consumers:
            self._advance(consumer, consumer_index, forwarded)

    def _call(self, task: _Task, method, *args):
        out = self._call_for(task.node, method, *args)
        if task.ctx.late_output:  # rows the operator dropped as late, for its source's late-rows table
            late, task.ctx.late_output = task.ctx.late_output, []
            self._emit(task, late, LATE_ROWS_PORT)
        return out

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
        if self.coordinator is None and self.checkpoints is not None:
            self.coordinator = Coordinator(self.graph, self.checkpoints, warn=self.warn)
        try:
            restore = self.coordinator.restore_point() if self.coordinator else None
            if restore is None and self.coordinator is not None and not self.sinks_prepared:
                self._discard_staged_output()
            if restore is not None:
                self._recover_sinks(restore)
                if restore.finished:  # killed after the final checkpoint: its output is now committed
                    self.coordinator.mark_committed(restore.event)
                    self._already_finished = True
                    return self._result(time.perf_counter() - started)
                self._restore(restore)
            for task in operators:
                self._call(task, task.operator.open)
            self._read_sources(started)
            if self._stop_requested:
                return self._result(time.perf_counter() - started)
            for task in operators:  # topological order: upstream finishes first
                if task.node.kind != "sink" or self.coordinator is None:
                    self._emit(task, self._call(task, task.operator.finish))
            if self.coordinator is not None:
                self._final_checkpoint()
        finally:
            if isinstance(self.coordinator, Coordinator):
                self.coordinator.settle()
            for task in operators:
                task.operator.close()
        return self._result(time.perf_counter() - started)

    # -- checkpoints -------------------------------------------------------------
    def _at_boundary(self) -> None:
        """Between two source batches: nothing is in flight, so a barrier reaches every operator here."""
        faults.reach("batch")
        coordinator = self.coordinator
        if coordinator is None:
            return
        coordinator.on_batch()
        if self.control is not None:
            for request in self.control.poll():
                self._handle_request(request)
        while self._savepoint_requests:
            coordinator.request_savepoint(*self._savepoint_requests.pop(0))
        self._report(coordinator.poll(self.commit))
        kind = coordinator.due()
        if kind is not None:
            self._checkpoint(kind)

    def barrier(self, checkpoint_id: int) -> tuple[dict, dict, dict]:
        """Barrier ``checkpoint_id`` passes every operator of this subtask: source positions,
        a consistent copy of each operator's state, and every sink's uncommitted handles."""
        sources = {t.node.id: t.reader.position() for t in self.tasks.values() if t.reader}
        snapshots = {t.node.id: self._call(t, t.operator.snapshot)
                     for t in self.tasks.values() if t.operator is not None and t.node.kind != "sink"}
        for task in self.tasks.values():
            if task.node.kind == "sink":
                handle = self._call(task, task.operator.sink.pre_commit, checkpoint_id)
                self.uncommitted.setdefault(task.node.id, []).append(handle)
        handles = {sink_id: list(handles) for sink_id, handles in self.uncommitted.items()}
        return sources, snapshots, handles

    def _checkpoint(self, kind: str, *, finished: bool = False) -> int:
        checkpoint_id = self.coordinator.next_id
        sources, snapshots, handles = self.barrier(checkpoint_id)
        return self.coordinator.take(kind, sources, {op: {0: state} for op, state in snapshots.items()},
                                     {sink: {0: h} for sink, h in handles.items()}, finished=finished,
                                     checkpoint_id=checkpoint_id)

    def commit(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete: publish every sink's output up to it."""
        for sink_id, handles in list(self.uncommitted.items()):
            task = self.tasks[sink_id]
            for handle in handles:
                self._call(task, task.operator.sink.commit, checkpoint_id, handle)
            del self.uncommitted[sink_id]
            faults.reach("commit")

    def _final_checkpoint(self) -> None:
        self._report(self.coordinator.poll(self.commit, wait=True))
        self._checkpoint("checkpoint", finished=True)
        event = self.coordinator.poll(self.commit, wait=True)
        if event is None:
            raise EngineError(f"the final checkpoint of job {self.graph.name} could not be written",
                              hint="see the warning above; the job can be run again to resume")
        self.coordinator.mark_committed(event)
        self._report(event)

    def _report(self, event: CheckpointEvent | None) -> None:
        if event is not None and self.on_checkpoint is not None:
            self.on_checkpoint(event)

    def _handle_request(self, request) -> None:
        if request.kind in ("savepoint", "stop"):
            def done(event: CheckpointEvent) -> None:
                request.reply(ok=True, path=str(event.path), checkpoint_id=event.checkpoint_id)
                if request.kind == "stop":
                    self.stopped_with = event
                    self._stop_requested = True

            self.coordinator.request_savepoint(request.path, done)
        else:
            request.reply(ok=False, error=f"unknown request {request.kind!r}")

    # -- recovery ----------------------------------------------------------------
    def _recover_sinks(self, restore: RestorePoint) -> None:
        """Commit the restored checkpoint's output again (idempotent); discard other staged output."""
        for task in self.tasks.values():
            if task.node.kind == "sink":
                if restore.sink_handles is not None:
                    self._call(task, task.operator.sink.recover, restore.sink_handles.get(task.node.id, []))
                task.operator.resuming = True

    def _discard_staged_output(self) -> None:
        """A fresh start: output a killed earlier run staged but never published is deleted."""
        for task in self.tasks.values():
            if task.node.kind == "sink":
                self._call(task, task.operator.sink.recover, [])

    def _restore(self, restore: RestorePoint) -> None:
        for task in self.tasks.values():
            if task.reader is not None and task.node.id in restore.sources:
                task.reader.restore(restore.sources[task.node.id])
            elif task.operator is not None and task.node.kind != "sink":
                states = restore.states(task.node.id)
                states = [s for s in states if s is not None]
                if not states:
                    continue
                merge = getattr(type(task.operator), "merge_snapshots", None)
                state = states[0] if len(states) == 1 or merge is None else merge(states)
                self._call(task, task.operator.restore, state)

    def _read_sources(self, started: float) -> None:
        streams = {t.node.id: iter(t.reader) for t in self.tasks.values() if t.reader}
        next_report = started + self.progress_interval
        while streams:
            if self._cancelled.is_set():
                raise JobCancelled(f"job {self.graph.name} was cancelled")
            if self._stop_requested:
                return
            self.step += 1
            for node_id in list(streams):
                task = self.tasks[node_id]
                step = self._call(task, next, streams[node_id], None)
                if step is None:
                    del streams[node_id]
                    continue
                batch, watermark = step
                if batch is not None:
                    self._emit(task, [batch])
                if watermark is not None:
                    self._advance(task, 0, watermark.timestamp)
            self._at_boundary()
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
        checkpoints = list(self.coordinator.completed) if self.coordinator else []
        return JobResult(self.graph.name, metrics, rows_read, elapsed, checkpoints, self.stopped_with,
                         self._already_finished)


def _batch_size(node: OperatorNode) -> dict:
    size = node.config.get("batch_size")
    return {"batch_size": int(size)} if size else {}

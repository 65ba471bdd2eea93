"""Runs a JobGraph in this process, pushing batches through the DAG.

Sources are read round-robin, one batch at a time. Each batch goes depth
first through its consumers; a watermark follows the batches it covers.
What each task does with a batch, a watermark or a barrier is ``task.Task``'s,
shared with the parallel executor's workers: this module is the driver that
runs every task of a job in one process, where an edge is a direct call and
a barrier reaches every task at a batch boundary (nothing is in flight there).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa

from weir.engine.changelog import ROW_KIND
from weir.engine.connectors.options import parse_duration_seconds
from weir.engine.connectors.registry import create_sink, create_source
from weir.engine.errors import EngineError, JobCancelled
from weir.engine.graph import JobGraph, OperatorNode
from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.base import NULL_TIME_ROWS_DROPPED, Operator, OperatorContext
from weir.engine.operators.registry import build_operator, operator_class
from weir.engine import faults
from weir.engine.checkpoint.coordinator import CheckpointConfig, CheckpointEvent, Coordinator, RestorePoint
from weir.engine.runtime.control import STOP_AT_CHECKPOINT, ControlChannel
from weir.engine.runtime.exchange import needed_columns
from weir.engine.runtime.sink_writer import SinkWriter
from weir.engine.runtime.source_reader import SourceReader
from weir.engine.runtime.task import OperatorMetrics, Task
from weir.engine.state.memory import ManagedMemory
from weir.engine.udfs import install_specs


@dataclass
class Progress:
    rows_read: int
    elapsed: float
    watermark: int  # µs; MIN_WATERMARK before the first
    #: Rows that reached the sinks (a parallel job's workers report theirs at its end: 0 till then).
    rows_written: int = 0

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
    #: When the job had finished and committed before: what the run says instead of a summary.
    finished_before: str = ""
    #: Sends that waited for a full exchange outbox ('weir.exchange.buffer-size'; parallel jobs).
    backpressure_waits: int = 0

    @property
    def events_per_second(self) -> float:
        return self.rows_read / self.elapsed if self.elapsed > 0 else 0.0

    def counter(self, name: str) -> int:
        return sum(m.counters.get(name, 0) for m in self.operators)

    @property
    def null_time_rows_dropped(self) -> int:
        """Rows an event-time operator dropped because their event time was NULL."""
        return self.counter(NULL_TIME_ROWS_DROPPED)

    def late_rows_by_source(self) -> dict[str, int]:
        """Rows dropped as late, per source table ('a+b' for rows of a join of a and b)."""
        totals: dict[str, int] = {}
        for m in self.operators:
            for source, value in m.late_by_source.items():
                totals[source] = totals.get(source, 0) + value
        return dict(sorted(totals.items()))


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
        #: Why the job stopped early, if it did: 'stopped with savepoint ...'.
        self.stopped_with: CheckpointEvent | None = None
        self._stop_requested = False
        self._already_finished = False
        self.on_progress = on_progress
        self.progress_interval = progress_interval
        self.tasks: dict[str, Task] = {}
        self._cancelled = threading.Event()
        self._started = time.perf_counter()
        #: Savepoints asked for from another thread: (path, callback), taken at the next boundary.
        self._savepoint_requests: list = []
        #: A control request to take a checkpoint and stop (``STOP_AT_CHECKPOINT``), until it is served.
        self._stop_at_checkpoint = None

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
        install_specs(self.graph.functions)  # import the job's Python UDFs in this process
        memory = ManagedMemory.for_job(self.graph.settings, parallelism=self.parallelism, spill_dir=self.spill_dir)
        for node in self.graph.nodes:
            ctx = OperatorContext(operator_id=node.id, output_schema=node.output_schema,
                                  max_parallelism=int(self.graph.settings.get("pipeline.max-parallelism", 128)),
                                  state_backend=self.state_backend, spill_dir=self.spill_dir, memory=memory,
                                  subtask_index=self.subtask, parallelism=self.parallelism,
                                  input_sources=["+".join(self.graph.source_tables(e.source)) for e in node.inputs])
            operator, reader = Task.call_for(node, self._instantiate, node, ctx)
            self.tasks[node.id] = task = Task(node, ctx, operator, reader)
            task.consumers = []
            self._connect(task)
        for task in self.tasks.values():
            for index, edge in enumerate(task.node.inputs):
                self.tasks[edge.source].consumers.append((task, index))
        for task in self.tasks.values():
            if task.reader is not None and (columns := self._columns_read(task)) is not None:
                task.reader.source.project(columns)
        for task in self.tasks.values():
            if task.kind.commits_output:
                task.operator.resuming = self.sinks_prepared
                task.operator.sink.job = self.graph.name  # the job its commit log records

    @staticmethod
    def _instantiate(node: OperatorNode, ctx: OperatorContext) -> tuple[Operator | None, SourceReader | None]:
        kind = operator_class(node.kind)
        if kind.reads_source:
            config = node.typed_config()
            source = create_source(config.options, node.output_schema, **_batch_size(node))
            idle = config.options.get("source.idle-timeout") or config.idle_timeout
            return None, SourceReader(source, config.watermark, bounded=config.watermark_bounded,
                                      idle_timeout=parse_duration_seconds("source.idle-timeout", idle) if idle else None,
                                      subtask=ctx.subtask_index, parallelism=ctx.parallelism,
                                      merge_bytes=config.merge_bytes)
        if kind.commits_output:
            sink = create_sink(node.connector_options(), node.output_schema, subtask_index=ctx.subtask_index)
            return SinkWriter(sink, ctx), None
        return build_operator(node.kind, node.config, ctx), None

    @staticmethod
    def _columns_read(task: Task) -> list[str] | None:
        """The columns of source ``task`` that its consumers read (``exchange.needed_columns``)
        and its watermark names; None when some consumer may read any column."""
        schema = task.node.output_schema
        watermark = task.node.typed_config().watermark or ""
        keep = {name for name in schema.names if name in watermark or name == ROW_KIND}
        for consumer, index in task.consumers:
            # (typed: a graph built by hand may hold its configs as JSON dicts)
            needed = needed_columns(dataclasses.replace(consumer.node, config=consumer.node.typed_config()), schema)
            keys = consumer.node.inputs[index].keys or ()
            if needed is None:
                return None
            keep.update(needed, keys)
        return [name for name in schema.names if name in keep] if task.consumers else None

    # -- data flow: an edge is a direct call -----------------------------------
    def _connect(self, task: Task) -> None:
        task.emit = lambda batches, port=0: self._emit(task, batches, port)
        task.forward = lambda watermark: self._forward(task, watermark)

    def _emit(self, task: Task, batches: list[pa.RecordBatch], port: int = 0) -> None:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if port == 0:
                task.metrics.rows_out += batch.num_rows
            for consumer, index in task.consumers:
                if consumer.node.inputs[index].port == port:
                    consumer.process(batch, index)

    def _forward(self, task: Task, watermark: int) -> None:
        for consumer, index in task.consumers:
            combined = consumer.combine(index, watermark)
            if combined is not None:
                consumer.advance(combined)

    def _call(self, task: Task, method, *args):
        return task.call(method, *args)

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
                if not task.kind.commits_output:
                    task.finish()
                elif self.coordinator is None:  # no checkpoints: the sink publishes as it finishes
                    task.emit(task.call(task.operator.finish), 0)
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
        if self._stop_at_checkpoint is not None:
            self._checkpoint_and_stop()
            return
        self._report(coordinator.poll(self.commit))
        kind = coordinator.due()
        if kind is not None:
            self._checkpoint(kind)

    def barrier(self, checkpoint_id: int, *, finished: bool = False) -> tuple[dict, dict, dict]:
        """Barrier ``checkpoint_id`` passes every operator of this subtask: source positions,
        a consistent copy of each operator's state, and every sink's uncommitted handles.

        The final checkpoint of a finished job (``finished``) holds no operator state: a run
        that finds it only commits its output and ends (``restore.finished``), as Flink's final
        checkpoint of finished tasks does not snapshot them, so writing a join's rows there
        would only cost time and memory."""
        sources = {t.node.id: t.snapshot(checkpoint_id) for t in self.tasks.values() if t.reader}
        snapshots = {} if finished else {
            t.node.id: t.snapshot(checkpoint_id)
            for t in self.tasks.values() if t.operator is not None and not t.kind.commits_output}
        for task in self.tasks.values():
            if task.kind.commits_output:
                task.snapshot(checkpoint_id)
        return sources, snapshots, self.uncommitted

    @property
    def uncommitted(self) -> dict[str, list]:
        """Sink id -> handles pre-committed and not yet committed."""
        return {t.node.id: list(t.uncommitted) for t in self.tasks.values() if t.uncommitted}

    def _checkpoint(self, kind: str, *, finished: bool = False) -> int:
        checkpoint_id = self.coordinator.next_id
        sources, snapshots, handles = self.barrier(checkpoint_id, finished=finished)
        return self.coordinator.take(kind, sources, {op: {0: state} for op, state in snapshots.items()},
                                     {sink: {0: h} for sink, h in handles.items()}, finished=finished,
                                     checkpoint_id=checkpoint_id)

    def commit(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete: publish every sink's output up to it."""
        for task in self.tasks.values():
            if task.reader is not None:  # (for information: Kafka commits the offsets to its consumer group)
                task.reader.checkpoint_complete(checkpoint_id)
        for sink_id in self.uncommitted:
            self.tasks[sink_id].commit(checkpoint_id)
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

    def _checkpoint_and_stop(self) -> None:
        """Serve a ``STOP_AT_CHECKPOINT`` request (Ctrl-C or SIGTERM to `weir run`): wait for the
        checkpoint in flight, take one more, commit its output, and stop. A later run of the job
        resumes from that checkpoint."""
        request, self._stop_at_checkpoint = self._stop_at_checkpoint, None
        self._report(self.coordinator.poll(self.commit, wait=True))
        self._checkpoint("checkpoint")
        event = self.coordinator.poll(self.commit, wait=True)
        self._stop_requested = True
        if event is None:
            request.reply(ok=False, error="the last checkpoint could not be written (see the warning); "
                                          "the job stopped and resumes from its previous checkpoint")
            return
        self._report(event)
        self.stopped_with = event
        request.reply(ok=True, path=str(event.path), checkpoint_id=event.checkpoint_id)

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
        elif request.kind == STOP_AT_CHECKPOINT:
            self._stop_at_checkpoint = request
        else:
            request.reply(ok=False, error=f"unknown request {request.kind!r}")

    # -- recovery ----------------------------------------------------------------
    def _recover_sinks(self, restore: RestorePoint) -> None:
        """Commit the restored checkpoint's output again (idempotent); discard other staged output."""
        for task in self.tasks.values():
            if task.kind.commits_output:
                if restore.sink_handles is not None:
                    self._call(task, task.operator.sink.recover, restore.sink_handles.get(task.node.id, []))
                task.operator.resuming = True

    def _discard_staged_output(self) -> None:
        """A fresh start: output a killed earlier run staged but never published is deleted."""
        for task in self.tasks.values():
            if task.kind.commits_output:
                self._call(task, task.operator.sink.recover, [])

    def _restore(self, restore: RestorePoint) -> None:
        faults.reach("restore")
        for task in self.tasks.values():
            if task.reader is not None and task.node.id in restore.sources:
                task.reader.restore(restore.sources[task.node.id])
            elif task.operator is not None and not task.kind.commits_output:
                states = restore.states(task.node.id)
                states = [s for s in states if s is not None]
                if not states:
                    continue
                merge = len(states) > 1 and task.kind.merges_snapshots
                state = task.kind.merge_snapshots(states) if merge else states[0]
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
                    task.emit([batch], 0)
                if watermark is not None and watermark.timestamp > task.watermark:
                    task.advance(watermark.timestamp)
            self._at_boundary()
            if self.on_progress and time.perf_counter() >= next_report:
                self.on_progress(self.progress(started))
                next_report = time.perf_counter() + self.progress_interval

    def progress(self, started: float | None = None) -> Progress:
        """Rows read and written, elapsed time and watermark so far (``on_progress`` gets it in
        the executor's thread; another thread had better take that copy)."""
        started = self._started if started is None else started
        tasks = list(self.tasks.values())
        readers = [t for t in tasks if t.reader]
        return Progress(
            rows_read=sum(t.reader.rows_read for t in readers),
            elapsed=time.perf_counter() - started,
            watermark=min((t.watermark for t in readers), default=MIN_WATERMARK),
            rows_written=sum(t.metrics.rows_in for t in tasks if t.kind.commits_output),
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
            task.metrics.late_by_source = dict(task.ctx.late_by_source)
            metrics.append(task.metrics)
        rows_read = sum(t.reader.rows_read for t in self.tasks.values() if t.reader)
        checkpoints = list(self.coordinator.completed) if self.coordinator else []
        return JobResult(self.graph.name, metrics, rows_read, elapsed, checkpoints, self.stopped_with,
                         self._already_finished)


def _batch_size(node: OperatorNode) -> dict:
    size = node.typed_config().batch_size
    return {"batch_size": int(size)} if size else {}

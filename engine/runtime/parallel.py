"""Running a job at parallelism N: N worker processes, one coordinator.

Worker i runs subtask i of every operator (a ``LocalExecutor`` in subtask
mode; how rows are divided is in ``partitioning.py``). The coordinator, in
the calling process, owns checkpoints:

1. It picks checkpoint n and a source step s a little ahead of every worker,
   and sends ``barrier(n, s)``. Every worker reads the same steps in the same
   order, so at step s they all stand at the same cut of the input.
2. Each worker, at the end of step s, snapshots its operators, pre-commits
   its sinks and sends the lot. A worker already past s answers ``missed``:
   n is abandoned (its pre-committed output rides along with the next one).
3. With all N snapshots the coordinator writes checkpoint n in the background
   (``Coordinator.take``), metadata last. Once it is durable it sends
   ``complete(n)`` and each worker commits its sinks' output.
4. At the end of input each worker sends a final snapshot; the coordinator
   writes the finished checkpoint and sends ``complete``; the workers commit
   and report their metrics.

On recovery the coordinator publishes the restored checkpoint's sink output
once, and hands each worker the state of the key groups it owns — whatever
the parallelism the checkpoint was taken at.
"""
from __future__ import annotations

import multiprocessing
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable

from engine.checkpoint.coordinator import CheckpointConfig, CheckpointEvent, Coordinator, RestorePoint
from engine.connectors.registry import create_sink
from engine.errors import EngineError, JobCancelled
from engine.graph import JobGraph
from engine.messages import MIN_WATERMARK
from engine.runtime.control import ControlChannel
from engine.runtime.local import JobResult, LocalExecutor, OperatorMetrics, Progress
from engine.runtime.partitioning import check_no_repartitioning
from engine.state.key_groups import range_for_subtask

#: The id under which a worker stages its final output.
FINAL = 2**62
#: How many source steps ahead of the fastest worker a barrier is placed.
BARRIER_LEAD = 2


# -- the worker's side ---------------------------------------------------------
class RemoteCoordinator:
    """What a worker's executor sees of the coordinator: barriers arrive over a pipe."""

    def __init__(self, conn: Connection, subtask: int, restore: dict | None):
        self.conn = conn
        self.subtask = subtask
        self.executor: LocalExecutor | None = None
        self.completed: list[CheckpointEvent] = []
        self._restore = restore
        self._barrier: tuple[int, int, str] | None = None  # (id, step, kind)
        self._taken: int | None = None  # the local id of the snapshot awaiting completion
        self._complete: list[tuple[int, bool]] = []
        self._stop = False

    # what LocalExecutor calls
    def restore_point(self) -> RestorePoint | None:
        if self._restore is None:
            return None
        states = self._restore["states"]
        return RestorePoint(self._restore["event"], self._restore["sources"], False, None,
                            lambda operator_id: states.get(operator_id, []))

    @property
    def next_id(self) -> int:
        return self._barrier[0] if self._barrier is not None else FINAL

    def on_batch(self) -> None:
        ex = self.executor
        readers = [t.reader for t in ex.tasks.values() if t.reader]
        watermark = min((t.watermark for t in ex.tasks.values() if t.reader), default=MIN_WATERMARK)
        self.conn.send(("progress", self.subtask, ex.step, sum(r.rows_read for r in readers), watermark))

    def due(self) -> str | None:
        self._receive()
        if self._barrier is None or self._taken is not None:
            return None
        checkpoint_id, step, kind = self._barrier
        if self.executor.step == step:
            return kind
        if self.executor.step > step:
            self._miss()
        return None

    def take(self, kind, sources, snapshots, handles, *, finished=False, checkpoint_id=None) -> int:
        if finished and self._barrier is not None:
            self._miss()  # the input ended before the barrier's step
        self._taken = FINAL if finished else checkpoint_id
        self.conn.send(("snapshot", self.subtask, None if finished else checkpoint_id, kind, finished,
                        sources, {op: by[0] for op, by in snapshots.items()},
                        {sink: by[0] for sink, by in handles.items()}))
        self._barrier = None
        return self._taken

    def poll(self, commit: Callable[[int], None], *, wait: bool = False) -> CheckpointEvent | None:
        self._receive(block=wait and self._taken is not None)
        while wait and self._taken is not None and not self._complete:
            self._receive(block=True)
        event = None
        while self._complete:
            checkpoint_id, final = self._complete.pop(0)
            if self._taken is None:
                continue
            commit(self._taken)
            event = CheckpointEvent(checkpoint_id, "checkpoint", 0, 0.0, Path())
            self._taken = None
        if self._stop:
            self.executor._stop_requested = True
        return event

    def mark_committed(self, event: CheckpointEvent) -> None:
        """The coordinator keeps the marker."""

    @property
    def in_flight(self) -> bool:
        return self._taken is not None

    # the pipe
    def _miss(self) -> None:
        self.conn.send(("missed", self.subtask, self._barrier[0]))
        self._barrier = None

    def _receive(self, block: bool = False) -> None:
        while block or self.conn.poll():
            block = False
            message = self.conn.recv()
            kind = message[0]
            if kind == "barrier":
                self._barrier = tuple(message[1:])
            elif kind == "abort":
                if self._barrier is not None and self._barrier[0] == message[1]:
                    self._barrier = None
                if self._taken == message[1]:
                    self._taken = None  # its pre-committed output goes with the next checkpoint
            elif kind == "complete":
                self._complete.append((message[1], message[2]))
            elif kind == "stop":
                self._stop = True  # after committing what completed before it (see poll)
            elif kind == "cancel":
                self.executor.cancel()


def _worker(conn: Connection, graph_json: dict, subtask: int, parallelism: int, restore: dict | None,
            backend: str, spill_dir: str | None) -> None:
    graph = JobGraph.from_json(graph_json)
    remote = RemoteCoordinator(conn, subtask, restore)
    executor = LocalExecutor(graph, subtask=subtask, parallelism=parallelism, coordinator=remote,
                             state_backend=backend, spill_dir=spill_dir, sinks_prepared=True)
    remote.executor = executor
    try:
        result = executor.run()
        conn.send(("done", subtask, result))
    except JobCancelled:
        conn.send(("cancelled", subtask))
    except EngineError as error:
        conn.send(("error", subtask, error.message, error.hint, error.operator_id))
    except BaseException as error:  # a bug: say what it was rather than die silently
        conn.send(("error", subtask, f"{type(error).__name__}: {error}", None, None))


# -- the coordinator's side ------------------------------------------------------
@dataclass
class _Collect:
    kind: str
    finished: bool
    sources: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)  # op -> subtask -> state
    handles: dict = field(default_factory=dict)  # sink -> subtask -> [handles]
    arrived: set = field(default_factory=set)


class ProcessExecutor:
    def __init__(self, graph: JobGraph, parallelism: int, *, checkpoints: CheckpointConfig,
                 on_progress: Callable[[Progress], None] | None = None, progress_interval: float = 0.5,
                 on_checkpoint: Callable[[CheckpointEvent], None] | None = None,
                 warn: Callable[[str], None] = lambda m: None, control: ControlChannel | None = None,
                 state_backend: str = "duckdb", spill_dir: str | None = None):
        self.graph = graph
        self.parallelism = parallelism
        self.coordinator = Coordinator(graph, checkpoints, warn=warn)
        self.on_progress, self.progress_interval = on_progress, progress_interval
        self.on_checkpoint, self.warn, self.control = on_checkpoint, warn, control
        self.state_backend, self.spill_dir = state_backend, spill_dir
        self.max_parallelism = int(graph.settings.get("pipeline.max-parallelism", 128))
        self._conns: list[Connection] = []
        self._processes: list[multiprocessing.Process] = []
        self._progress: dict[int, tuple[int, int, int]] = {}  # subtask -> (step, rows, watermark)
        self._results: dict[int, JobResult] = {}
        self._collecting: dict[Any, _Collect] = {}
        self._pending_barrier: int | None = None
        self._stopped_with: CheckpointEvent | None = None
        self._stopping = False
        self._cancelled = False
        self._final_id: int | None = None
        self._final_event: CheckpointEvent | None = None
        self._last_barrier_step = 0
        self._started = time.perf_counter()

    def cancel(self) -> None:
        self._cancelled = True

    def run(self) -> JobResult:
        check_no_repartitioning(self.graph, self.parallelism)  # before any worker starts
        restore = self.coordinator.restore_point()
        if restore is None:
            self._prepare_sinks()
        else:
            self._recover_sinks(restore)
            if restore.finished:
                self.coordinator.mark_committed(restore.event)
                return JobResult(self.graph.name, [], 0, 0.0, [], None, True)
        self._start_workers(restore)
        try:
            self._loop()
            if self._final_event is not None:  # every worker has committed its final output
                self.coordinator.mark_committed(self._final_event)
        finally:
            self.coordinator.settle()
            for process in self._processes:
                if process.is_alive():
                    process.terminate()
                process.join()
        return self._result()

    # -- setup ---------------------------------------------------------------
    def _prepare_sinks(self) -> None:
        """A fresh start: ready each sink once (a materialized view is replaced here), so that
        the workers' sink subtasks only ever add to it."""
        for node in self.graph.nodes:
            if node.kind == "sink":
                sink = create_sink(node.config["options"], node.output_schema)
                sink.recover([])  # output a killed earlier run staged and never published
                sink.open()
                sink.finish()

    def _recover_sinks(self, restore: RestorePoint) -> None:
        for node in self.graph.nodes:
            if node.kind == "sink":
                create_sink(node.config["options"], node.output_schema).recover(
                    restore.sink_handles.get(node.id, []))

    def _start_workers(self, restore: RestorePoint | None) -> None:
        context = multiprocessing.get_context("spawn")
        checkpoint = self.coordinator.restored
        for subtask in range(self.parallelism):
            payload = None
            if restore is not None:
                key_groups = range_for_subtask(subtask, self.parallelism, self.max_parallelism)
                payload = {"event": restore.event, "sources": restore.sources,
                           "states": {op: checkpoint.operator_state(op, key_groups)
                                      for op in checkpoint.operator_ids}}
            parent, child = context.Pipe()
            spill = f"{self.spill_dir}/subtask-{subtask}" if self.spill_dir else None
            process = context.Process(
                target=_worker, name=f"weir-{self.graph.name}-{subtask}", daemon=True,
                args=(child, self.graph.to_json(), subtask, self.parallelism, payload, self.state_backend, spill))
            process.start()
            child.close()
            self._conns.append(parent)
            self._processes.append(process)

    # -- the loop --------------------------------------------------------------
    def _loop(self) -> None:
        next_report = time.perf_counter() + self.progress_interval
        while len(self._results) < self.parallelism:
            live = [c for i, c in enumerate(self._conns) if i not in self._results]
            for conn in wait(live, timeout=0.05):
                try:
                    message = conn.recv()
                except EOFError:
                    subtask = self._conns.index(conn)
                    raise EngineError(f"worker {subtask} of job {self.graph.name} died "
                                      f"(exit code {self._processes[subtask].exitcode})",
                                      hint="the job resumes from its latest checkpoint when run again") from None
                self._handle(message)
            self._checkpoints()
            if self._cancelled:
                self._broadcast(("cancel",))
                raise JobCancelled(f"job {self.graph.name} was cancelled")
            if self.on_progress and time.perf_counter() >= next_report:
                self.on_progress(self.progress())
                next_report = time.perf_counter() + self.progress_interval

    def _handle(self, message: tuple) -> None:
        kind, subtask = message[0], message[1]
        if kind == "progress":
            self._progress[subtask] = message[2:]
        elif kind == "snapshot":
            self._collect(subtask, *message[2:])
        elif kind == "missed":
            self._abort(message[2])
        elif kind == "done":
            self._results[subtask] = message[2]
        elif kind == "cancelled":
            raise JobCancelled(f"job {self.graph.name} was cancelled")
        elif kind == "error":
            _, _, text, hint, operator_id = message
            raise EngineError(f"{text} (in worker {subtask})", hint=hint, operator_id=operator_id)

    def _collect(self, subtask, checkpoint_id, kind, finished, sources, snapshots, handles) -> None:
        key = "final" if finished else checkpoint_id
        collect = self._collecting.setdefault(key, _Collect(kind, finished))
        collect.arrived.add(subtask)
        if subtask == 0:
            collect.sources = sources
        for op, state in snapshots.items():
            collect.snapshots.setdefault(op, {})[subtask] = state
        for sink, sink_handles in handles.items():
            collect.handles.setdefault(sink, {})[subtask] = sink_handles
        if not finished and len(collect.arrived) == self.parallelism and not self.coordinator.in_flight:
            self._write(key)  # the final checkpoint is written by _checkpoints

    def _write(self, key) -> None:
        collect = self._collecting.pop(key)
        checkpoint_id = self.coordinator.next_id if collect.finished else key
        self.coordinator.take(collect.kind, collect.sources, collect.snapshots, collect.handles,
                              finished=collect.finished, parallelism=self.parallelism,
                              checkpoint_id=checkpoint_id)
        self._pending_barrier = None

    def _abort(self, checkpoint_id: int) -> None:
        if checkpoint_id in self._collecting or self._pending_barrier == checkpoint_id:
            self._collecting.pop(checkpoint_id, None)
            self._pending_barrier = None
            self._broadcast(("abort", checkpoint_id))

    def _checkpoints(self) -> None:
        coordinator = self.coordinator
        # complete(n) goes out before a stop that the savepoint's callback may send.
        event = coordinator.poll(lambda n: self._broadcast(("complete", n, n == self._final_id)))
        if event is not None:
            if event.checkpoint_id == self._final_id:
                self._final_event = event
            if self.on_checkpoint:
                self.on_checkpoint(event)
        if not coordinator.in_flight and "final" in self._collecting \
                and len(self._collecting["final"].arrived) == self.parallelism:
            self._final_id = coordinator.next_id
            self._write("final")
        if self.control is not None:
            for request in self.control.poll():
                self._request(request)
        if self._pending_barrier is None and not coordinator.in_flight and not self._stopping:
            kind = coordinator.due()
            if kind is None and coordinator.config.interval_batches:
                kind = self._batches_due()
            if kind is not None and self._progress:
                checkpoint_id = coordinator.next_id
                step = max(p[0] for p in self._progress.values()) + BARRIER_LEAD
                if coordinator.config.interval_batches and kind == "checkpoint":
                    every = coordinator.config.interval_batches
                    step = -(-step // every) * every
                self._pending_barrier = checkpoint_id
                coordinator.next_id += 1
                self._broadcast(("barrier", checkpoint_id, step, kind))

    def _batches_due(self) -> str | None:
        every = self.coordinator.config.interval_batches
        current = max((p[0] for p in self._progress.values()), default=0)
        if current - self._last_barrier_step >= every:
            self._last_barrier_step = current
            return "checkpoint"
        return None

    def _request(self, request) -> None:
        if request.kind not in ("savepoint", "stop"):
            request.reply(ok=False, error=f"unknown request {request.kind!r}")
            return

        def done(event: CheckpointEvent) -> None:
            request.reply(ok=True, path=str(event.path), checkpoint_id=event.checkpoint_id)
            if request.kind == "stop":
                self._stopped_with = event
                self._stopping = True
                self._broadcast(("stop",))

        self.coordinator.request_savepoint(request.path, done)

    def _broadcast(self, message: tuple) -> None:
        for conn in self._conns:
            try:
                conn.send(message)
            except (BrokenPipeError, OSError):
                pass

    # -- reporting ---------------------------------------------------------------
    def progress(self) -> Progress:
        first = self._progress.get(0, (0, 0, MIN_WATERMARK))
        watermark = min((p[2] for p in self._progress.values()), default=MIN_WATERMARK)
        return Progress(rows_read=first[1], elapsed=time.perf_counter() - self._started, watermark=watermark)

    def _result(self) -> JobResult:
        """Every worker read the whole input: rows read and source counters are worker 0's;
        the rest is summed over workers."""
        merged: dict[str, OperatorMetrics] = {}
        for subtask in sorted(self._results):
            for m in self._results[subtask].operators:
                total = merged.setdefault(m.id, OperatorMetrics(m.id, m.kind))
                if m.kind == "source" and subtask > 0:
                    continue
                total.rows_in += m.rows_in
                total.rows_out += m.rows_out
                for name, value in m.counters.items():
                    total.counters[name] = total.counters.get(name, 0) + value
        first = self._results.get(0)
        return JobResult(self.graph.name, list(merged.values()), first.rows_read if first else 0,
                         time.perf_counter() - self._started, list(self.coordinator.completed),
                         self._stopped_with, False)

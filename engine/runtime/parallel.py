"""Running a job at parallelism N: N worker processes, one coordinator.

Worker i runs subtask i of every operator (``subtask.SubtaskExecutor``): it
reads its share of the source splits and exchanges rows with the other
workers over pipes (``exchange.py``). The coordinator, in the calling
process, owns checkpoints:

1. It picks checkpoint n and sends ``barrier(n)`` to every worker; each
   injects it at its sources at its next batch boundary, and barrier n flows
   through the channels, aligned at every task with several (see
   ``subtask.py``).
2. Each worker, once every task of its own has passed n, sends its sources'
   positions, its operators' snapshots and its sinks' handles.
3. With all N the coordinator writes checkpoint n in the background
   (``Coordinator.take``), metadata last. Once it is durable it sends
   ``complete(n)`` and each worker commits its sinks' output.
4. At the end of input each worker says it has finished. Once all have (and
   no checkpoint is pending, nor a savepoint or stop asked for, which comes
   first), the coordinator numbers the final checkpoint and asks every worker
   for it; it writes the finished checkpoint and sends ``complete``; the
   workers commit and report their metrics. A worker pre-commits its sinks
   only under ids the coordinator sent, so the checkpoint that commits output
   is the one its name and the sinks' commit logs say (a savepoint taken
   after a worker finished holds that worker's last output as its own).

A sink whose output is one transaction (``Sink.global_commit``: a DuckDB table)
is committed once per checkpoint, by the coordinator, from every worker's
handles — Flink's global committer — so that the workers never queue on the
database's lock, and a materialized view is replaced by that single first
commit (until then it keeps the previous run's result). Other sinks (part
files) are committed by each worker on ``complete``.

On recovery the coordinator publishes the restored checkpoint's sink output
once, and hands each worker every source position (a worker reads only its
splits) and the state of the key groups it owns — whatever the parallelism
the checkpoint was taken at.
"""
from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import time
import traceback
from pathlib import Path
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Callable

from weir.engine import faults
from weir.engine.checkpoint.coordinator import CheckpointConfig, CheckpointEvent, Coordinator, RestorePoint
from weir.engine.checkpoint.location import location_text
from weir.engine.checkpoint.staging import discard_staged
from weir.engine.connectors.base import Sink
from weir.engine.connectors.registry import create_sink
from weir.engine.errors import EngineError, JobCancelled
from weir.engine.graph import JobGraph
from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.registry import operator_class
from weir.engine.pandas_import import defer_pandas
from weir.engine.runtime.control import STOP_AT_CHECKPOINT, ControlChannel
from weir.engine.runtime.local import JobResult, OperatorMetrics, Progress
from weir.engine.runtime.subtask import SubtaskExecutor
from weir.engine.runtime.workers import start_fork_server, worker_context


#: Seconds the coordinator waits for a worker to exit before it ends it the hard way.
JOIN_SECONDS = 5.0
#: Files a process has open beside its pipes (interpreter, DuckDB files, sockets): headroom.
OTHER_FILES = 64


def files_needed(parallelism: int) -> int:
    """Open files the coordinator holds while it starts N workers: both ends of a pipe
    between every ordered pair of workers and of each worker's control pipe, and spawn's own."""
    return 2 * parallelism * (parallelism - 1) + 4 * parallelism + OTHER_FILES


def check_parallelism(graph: JobGraph, parallelism: int) -> None:
    """Refuse, before the job starts, a parallelism above 'pipeline.max-parallelism' (a
    subtask would own no key group) or above the files this process may open. The soft
    open-file limit is raised towards the hard one where that is enough, as a JVM does."""
    max_parallelism = int(graph.settings.get("pipeline.max-parallelism", 128))
    if parallelism > max_parallelism:
        raise EngineError(f"'parallelism.default' is {parallelism}, above 'pipeline.max-parallelism' "
                          f"({max_parallelism}): a subtask would own no key group",
                          hint=f"set 'parallelism.default' to at most {max_parallelism}, or raise "
                               "'pipeline.max-parallelism' (a new state directory: key groups are fixed per job)")
    if parallelism <= 1:
        return
    needed = files_needed(parallelism)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard == resource.RLIM_INFINITY or hard >= needed:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
            return
        most = max(p for p in range(1, parallelism) if files_needed(p) <= hard) if files_needed(2) <= hard else 1
        raise EngineError(f"'parallelism.default' is {parallelism}: its {parallelism} workers need about "
                          f"{needed} open files (a pipe between every two), above this machine's limit of {hard}",
                          hint=f"use a parallelism of at most {most}, or raise the open-file limit "
                               "(`ulimit -n`, LimitNOFILE= in systemd)")


# -- the worker's side ---------------------------------------------------------
def _worker(conn: Connection, graph_json: dict, subtask: int, parallelism: int, restore_from: str | None,
            backend: str, spill_dir: str | None, peers_in: dict, peers_out: dict,
            environment: dict[str, str]) -> None:
    # Ctrl-C reaches the whole process group: the coordinator stops the workers (at a checkpoint).
    # SIGINT was blocked from the start (the fork server's mask); from here it is ignored.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # Forked from the fork server, which has the environment of when it started: the
    # coordinator's, now, is the job's (WEIR_FAULT, ...). (multiprocessing moves the worker
    # into the coordinator's directory itself.)
    os.environ.clear()
    os.environ.update(environment)
    faults.configure()
    defer_pandas()
    run_subtask(conn, graph_json, subtask, parallelism, restore_from, backend, spill_dir, peers_in, peers_out)


def run_subtask(conn: Connection, graph_json: dict, subtask: int, parallelism: int, restore_from: str | None,
                backend: str, spill_dir: str | None, peers_in: dict, peers_out: dict, *,
                stage_to: str | None = None) -> None:
    """Worker ``subtask``'s life, whatever process it runs in (a spawned process, a Ray actor):
    it reports to the coordinator over ``conn`` and to its peers over ``peers_out``. ``stage_to``:
    the checkpoint storage, where a worker that runs on another machine than the coordinator
    uploads its staged state tables itself (``engine.checkpoint.staging``)."""
    faults.set_subtask(subtask)
    conn.send(("ready", subtask))  # the interpreter has started and imported the engine
    graph = JobGraph.from_json(graph_json)
    try:
        executor = SubtaskExecutor(graph, subtask=subtask, parallelism=parallelism, control=conn,
                                   peers_in=peers_in, peers_out=peers_out, restore_from=restore_from,
                                   state_backend=backend, spill_dir=spill_dir, stage_to=stage_to)
        result = executor.run()
        conn.send(("done", subtask, result))
    except JobCancelled:
        conn.send(("cancelled", subtask))
    except EngineError as error:
        conn.send(("error", subtask, error.message, error.hint, error.operator_id))
    except BaseException as error:  # a bug: say what it was rather than die silently
        where = traceback.extract_tb(error.__traceback__)[-1]
        conn.send(("error", subtask, f"{type(error).__name__}: {error} ({Path(where.filename).name}:{where.lineno})",
                   None, None))


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
        #: When the pending barrier was sent (for 'execution.checkpointing.timeout').
        self._pending_since = 0.0
        #: Checkpoints aborted (expired): what workers still send for them is dropped.
        self._aborted: set[int] = set()
        self._stopped_with: CheckpointEvent | None = None
        self._stopping = False
        self._cancelled = False
        #: Workers that have finished (every task's input ended) and wait for the final checkpoint.
        self._finished: set[int] = set()
        #: The final checkpoint's id, once it was asked for.
        self._final_id: int | None = None
        self._final_event: CheckpointEvent | None = None
        self._last_barrier_step = 0
        self._started = time.perf_counter()
        self._ready: set[int] = set()
        #: Sink id -> the coordinator's instance of each sink it commits itself (``global_commit``).
        self._committers: dict[str, Sink] = {}
        #: Checkpoint id -> the handles its subtasks pre-committed: sink id -> subtask -> [handle].
        self._handles: dict[int, dict] = {}
        #: A ``STOP_AT_CHECKPOINT`` request being served, and the checkpoint taken for it.
        self._stop_request = None
        self._stop_checkpoint: int | None = None

    def cancel(self) -> None:
        self._cancelled = True

    def run(self) -> JobResult:
        restore = self.coordinator.restore_point()
        if restore is None:
            self._prepare_sinks()
        else:
            self._recover_sinks(restore)
            if restore.finished:
                self.coordinator.mark_committed(restore.event)
                return JobResult(self.graph.name, [], 0, 0.0, [], None, True)
        try:
            self._start_workers(restore)
            self._loop()
            if self._final_event is not None:  # every worker has committed its final output
                self.coordinator.mark_committed(self._final_event)
        finally:  # (also when the workers failed to start: none is left holding a CPU or a sink)
            self.coordinator.settle()
            self._end_workers()
            if len(self._results) < self.parallelism:  # failed: its sinks leave their database's
                for sink in self._committers.values():  # group, whose next commits (a restart's)
                    sink.abort()  # would otherwise wait for them while this executor is referenced
        return self._result()

    def _end_workers(self) -> None:
        """End every worker still running: one that reported its end has nothing left to do
        (its exit, interpreter shutdown, is not waited for), any other failed or was cancelled.
        Terminated, then killed: no wait here is longer than ``JOIN_SECONDS``."""
        for process in self._processes:
            if process.is_alive():
                process.terminate()
                process.join(JOIN_SECONDS)
            if process.is_alive():
                process.kill()  # SIGKILL: it cannot be ignored
                process.join()

    # -- setup ---------------------------------------------------------------
    def _prepare_sinks(self) -> None:
        """A fresh start: delete what a killed earlier run staged and never published, and create
        missing tables. Nothing is replaced here: a materialized view keeps its previous result
        until the first commit replaces it, in the coordinator."""
        for node in self.graph.nodes:
            if operator_class(node.kind).commits_output:
                sink = self._sink(node)
                sink.recover([])
                sink.open()
                if sink.global_commit:
                    self._committers[node.id] = sink

    def _recover_sinks(self, restore: RestorePoint) -> None:
        for node in self.graph.nodes:
            if operator_class(node.kind).commits_output:
                sink = self._sink(node)
                sink.recover(restore.sink_handles.get(node.id, []))
                if sink.global_commit:
                    sink.open(resuming=True)
                    self._committers[node.id] = sink

    def _sink(self, node) -> Sink:
        sink = create_sink(node.connector_options(), node.output_schema)
        sink.job = self.graph.name
        return sink

    def _commit(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is durable: commit the sinks committed here, once, with
        every worker's handles, then tell the workers to commit theirs."""
        handles = self._handles.pop(checkpoint_id, {})
        for older in [n for n in self._handles if n < checkpoint_id]:
            del self._handles[older]  # subsumed: a worker's handles list all it has not committed
        for sink_id, sink in self._committers.items():
            by_subtask = handles.get(sink_id, {})
            files = [f for subtask in sorted(by_subtask) for handle in by_subtask[subtask] for f in handle or []]
            sink.commit(checkpoint_id, files)
            faults.reach("commit")
        self._broadcast(("complete", checkpoint_id, checkpoint_id == self._final_id))

    def _start_workers(self, restore: RestorePoint | None) -> None:
        """Start the N workers. A restoring worker is given the checkpoint's path, not its state:
        it reads its own key groups from the checkpoint, so that nothing large is written to a
        worker before it runs — a worker that dies then is seen at once by ``_loop`` (its pipe
        ends) instead of blocking the write of its arguments for ever."""
        context = worker_context()
        restore_from = location_text(self.coordinator.restored.path) if restore is not None else None
        # One pipe per ordered pair of workers: (sender, receiver) -> (receiving end, sending end).
        ends = {(i, j): context.Pipe(duplex=False) for i in range(self.parallelism)
                for j in range(self.parallelism) if i != j}
        # A worker has the fork server's signal mask, SIGINT blocked (``start_fork_server``): a
        # Ctrl-C while it starts cannot end it; ``_worker`` then ignores SIGINT.
        start_fork_server()
        self._spawn(context, ends, restore_from)
        for receiving, sending in ends.values():  # the workers hold them now
            receiving.close()
            sending.close()

    def _spawn(self, context, ends: dict, restore_from: str | None) -> None:
        for subtask in range(self.parallelism):
            parent, child = context.Pipe()
            spill = f"{self.spill_dir}/subtask-{subtask}" if self.spill_dir else None
            process = context.Process(
                target=_worker, name=f"weir-{self.graph.name}-{subtask}", daemon=True,
                args=(child, self.graph.to_json(), subtask, self.parallelism, restore_from, self.state_backend, spill,
                      {i: ends[i, subtask][0] for i in range(self.parallelism) if i != subtask},
                      {j: ends[subtask, j][1] for j in range(self.parallelism) if j != subtask},
                      dict(os.environ)))
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
                except (EOFError, OSError):
                    raise self._died(self._conns.index(conn)) from None
                self._handle(message)
            self._checkpoints()
            if self._cancelled:
                self._broadcast(("cancel",))
                raise JobCancelled(f"job {self.graph.name} was cancelled")
            if self.on_progress and time.perf_counter() >= next_report:
                self.on_progress(self.progress())
                next_report = time.perf_counter() + self.progress_interval

    def _died(self, subtask: int) -> EngineError:
        """The error for worker ``subtask``, whose pipe ended without its result: it died."""
        process = self._processes[subtask]
        process.join(JOIN_SECONDS)  # its pipe closed as it died: reap it, for its exit code
        code = process.exitcode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        return EngineError(f"worker {subtask} of job {self.graph.name} died ({how})",
                           hint="the job resumes from its latest checkpoint when run again")

    def _handle(self, message: tuple) -> None:
        kind, subtask = message[0], message[1]
        if kind == "progress":
            self._progress[subtask] = message[2:]
        elif kind == "ready":
            self._ready.add(subtask)
            if len(self._ready) == self.parallelism:
                # Like the local executor's, the clock runs from when the engine is loaded.
                self._started = time.perf_counter()
        elif kind == "snapshot":
            self._collect(subtask, *message[2:])
        elif kind == "finished":
            self._finished.add(subtask)
        elif kind == "done":
            self._results[subtask] = message[2]
        elif kind == "cancelled":
            raise JobCancelled(f"job {self.graph.name} was cancelled")
        elif kind == "error":
            _, _, text, hint, operator_id = message
            raise EngineError(f"{text} (in worker {subtask})", hint=hint, operator_id=operator_id)

    def _collect(self, subtask, checkpoint_id, kind, finished, sources, snapshots, handles) -> None:
        if checkpoint_id in self._aborted:
            discard_staged(snapshots)  # a worker passed the barrier before it heard of the abort
            return
        collect = self._collecting.setdefault(checkpoint_id, _Collect(kind, finished))
        collect.arrived.add(subtask)
        for source_id, position in sources.items():  # each worker read its own splits
            merged = collect.sources.setdefault(source_id, {"offsets": {}, "split_watermarks": {},
                                                            "finished_splits": []})
            merged["offsets"].update(position.get("offsets", {}))
            merged["split_watermarks"].update(position.get("split_watermarks", {}))
            merged["finished_splits"] = sorted({*merged["finished_splits"], *position.get("finished_splits", [])})
            if "listed" in position:  # (a source that discovers splits: the splits listed so far)
                merged["listed"] = sorted({*merged.get("listed", []), *position["listed"]})
        for op, state in snapshots.items():
            collect.snapshots.setdefault(op, {})[subtask] = state
        for sink, sink_handles in handles.items():
            collect.handles.setdefault(sink, {})[subtask] = sink_handles
        if len(collect.arrived) == self.parallelism and not self.coordinator.in_flight:
            self._write(checkpoint_id)

    def _write(self, checkpoint_id: int) -> None:
        collect = self._collecting.pop(checkpoint_id)
        self._handles[checkpoint_id] = collect.handles
        self.coordinator.take(collect.kind, collect.sources, collect.snapshots, collect.handles,
                              finished=collect.finished, parallelism=self.parallelism,
                              checkpoint_id=checkpoint_id)
        self._pending_barrier = None

    def _checkpoints(self) -> None:
        coordinator = self.coordinator
        # complete(n) goes out before a stop that the savepoint's callback may send. Once the
        # final checkpoint is asked for every worker is idle, waiting for it: wait with them.
        event = coordinator.poll(self._commit, wait=self._final_id is not None)
        if event is not None:
            if event.checkpoint_id == self._final_id:
                self._final_event = event
            if self.on_checkpoint:
                self.on_checkpoint(event)
        self._stop_when_checkpointed(event)
        self._serve_requests()
        if self._pending_barrier is not None \
                and time.monotonic() - self._pending_since > coordinator.config.timeout:
            self._abort(self._pending_barrier)
        if self._pending_barrier is None and not coordinator.in_flight and not self._stopping \
                and self._final_id is None:
            every_worker_finished = len(self._finished) == self.parallelism
            if every_worker_finished:  # a savepoint or stop asked for before the final checkpoint comes first
                self._serve_requests(throttled=False)
            kind = "checkpoint" if self._stop_request is not None else coordinator.due()
            if every_worker_finished and kind != "savepoint" and self._stop_request is None:
                self._ask_for_final()
                return
            if kind is None and coordinator.config.interval_batches:
                kind = self._batches_due()
            if kind is not None and self._progress:
                checkpoint_id = coordinator.next_id
                self._pending_barrier, self._pending_since = checkpoint_id, time.monotonic()
                coordinator.next_id += 1
                self._broadcast(("barrier", checkpoint_id, kind))
                if self._stop_request is not None:
                    self._stop_checkpoint = checkpoint_id

    def _serve_requests(self, *, throttled: bool = True) -> None:
        """Take the control channel's requests (``weir savepoint``, ``weir stop``, Ctrl-C)."""
        if self.control is not None:
            for request in self.control.poll(throttled=throttled):
                self._request(request)

    def _ask_for_final(self) -> None:
        """Every worker has finished: number the final checkpoint and ask each for its part (its
        sources' last positions and its sinks' last output, pre-committed under this id). Its
        barrier passes no channel (every channel has ended) and is not timed out."""
        self._final_id = self.coordinator.next_id
        self.coordinator.next_id += 1
        self._broadcast(("final", self._final_id))

    def _stop_when_checkpointed(self, event: CheckpointEvent | None) -> None:
        """Serving a ``STOP_AT_CHECKPOINT`` request: once the checkpoint taken for it is complete
        (its output committed: ``complete`` went out first), stop every worker. A checkpoint that
        was aborted or failed is taken again."""
        if self._stop_checkpoint is None:
            return
        if event is not None and event.checkpoint_id == self._stop_checkpoint:
            self._stop_request.reply(ok=True, path=str(event.path), checkpoint_id=event.checkpoint_id)
            self._stop_request = self._stop_checkpoint = None
            self._stopped_with, self._stopping = event, True
            self._broadcast(("stop",))
        elif self._pending_barrier is None and not self.coordinator.in_flight:
            self._stop_checkpoint = None  # it failed: the next round takes another

    def _abort(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` did not complete within 'execution.checkpointing.timeout'
        (a worker that holds the barrier back, a slow source): give it up, as Flink expires it.
        What the workers acknowledged for it is dropped; each worker releases the channels that
        wait for its barrier (``BarrierAligner.abort``). A sink's output pre-committed at it stays
        pending and is committed with the next checkpoint that completes (as a Flink two-phase
        sink's transactions are), and a savepoint asked for stays asked for: the next barrier
        is that savepoint again."""
        self._aborted.add(checkpoint_id)
        dropped = self._collecting.pop(checkpoint_id, None)
        if dropped is not None:
            discard_staged(dropped.snapshots)
        self._pending_barrier = None
        self._broadcast(("abort", checkpoint_id))
        timeout = self.graph.settings.get("execution.checkpointing.timeout", "10min")
        self.warn(f"checkpoint {checkpoint_id} was aborted: it did not complete within "
                  f"'execution.checkpointing.timeout' ({timeout}); the job goes on and takes the next one")

    def _batches_due(self) -> str | None:
        every = self.coordinator.config.interval_batches
        current = max((p[0] for p in self._progress.values()), default=0)
        if current - self._last_barrier_step >= every:
            self._last_barrier_step = current
            return "checkpoint"
        return None

    def _request(self, request) -> None:
        if request.kind == STOP_AT_CHECKPOINT:
            self._stop_request = request
            return
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
        watermark = min((p[2] for p in self._progress.values()), default=MIN_WATERMARK)
        return Progress(rows_read=sum(p[1] for p in self._progress.values()),
                        elapsed=time.perf_counter() - self._started, watermark=watermark)

    def _result(self) -> JobResult:
        """Each worker read its own splits: every figure is the sum over workers."""
        merged: dict[str, OperatorMetrics] = {}
        for subtask in sorted(self._results):
            for m in self._results[subtask].operators:
                total = merged.setdefault(m.id, OperatorMetrics(m.id, m.kind))
                total.rows_in += m.rows_in
                total.rows_out += m.rows_out
                for name, value in m.counters.items():
                    total.counters[name] = total.counters.get(name, 0) + value
                for source, value in m.late_by_source.items():
                    total.late_by_source[source] = total.late_by_source.get(source, 0) + value
        return JobResult(self.graph.name, list(merged.values()), sum(r.rows_read for r in self._results.values()),
                         time.perf_counter() - self._started, list(self.coordinator.completed),
                         self._stopped_with, False,
                         backpressure_waits=sum(r.backpressure_waits for r in self._results.values()))

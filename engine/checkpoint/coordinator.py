"""Checkpoints of a running job: when to take one, what goes in it, when it is complete.

The protocol, as the local executor runs it:

1. At a batch boundary the coordinator triggers checkpoint n (its interval
   passed, or a savepoint was asked for). In the local executor nothing is in
   flight between operators at a batch boundary, so barrier n reaches every
   operator at this point: each source records its split offsets and split
   watermarks, and each operator hands over a consistent copy of its state
   (``snapshot``) — the synchronous part.
2. Each sink pre-commits: its output so far becomes durable but invisible,
   and it returns a handle.
3. A background thread writes the snapshots to checkpoint storage while
   processing goes on — the asynchronous part — and writes the checkpoint's
   metadata last, atomically: the checkpoint exists iff its metadata does.
4. At a later batch boundary the main thread sees n complete and tells every
   sink to commit n's output.
5. On recovery the latest complete checkpoint (or a savepoint) is restored:
   its sinks' handles are committed again (idempotently) and every other
   staged output is discarded; each operator restores its state, each
   source rewinds to its recorded offsets.

At the end of a bounded job, a final checkpoint marked ``finished`` carries
the last output; once its output is committed a marker file says so. A new run
of a job whose latest checkpoint is finished and committed writes nothing: it
raises ``AlreadyFinished`` (unless the job's SQL changed: then it is refused),
so that running a finished job again never changes its output. Starting over is
asked for (``CheckpointConfig.fresh``): the caller removes the checkpoints.

Every restore — from checkpoint k, or afresh (k = 0) — first reconciles the
sinks with their commit logs, which live beside the output (``Sink.withdraw``):
output published by checkpoints after k, whose checkpoint files were lost or
skipped as corrupt, is taken back or the run is refused, so that replaying never
publishes it twice. New checkpoint ids continue after the highest directory on
disk, readable or not.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from weir.engine import faults
from weir.engine.checkpoint.files import exists, write_atomically
from weir.engine.checkpoint.location import Location
from weir.engine.checkpoint.storage import Checkpoint, CheckpointStorage
from weir.engine.checkpoint.staging import discard_staged
from weir.engine.connectors.registry import create_sink
from weir.engine.errors import EngineError
from weir.engine.graph import JobGraph, OperatorNode
from weir.engine.operators.registry import KINDS, operator_class
from weir.engine.state.key_groups import range_for_subtask

COMMITTED_MARKER = "_output_committed"


@dataclass
class CheckpointEvent:
    """A completed checkpoint or savepoint, for the progress line and the summary."""

    checkpoint_id: int
    kind: str
    size_bytes: int
    duration: float
    path: Location


@dataclass
class CheckpointConfig:
    storage: CheckpointStorage
    interval: float | None = None  # seconds between checkpoints
    interval_batches: int | None = None  # or: source batches between checkpoints
    #: Seconds after which a checkpoint that has not completed is aborted ('execution.checkpointing.timeout').
    timeout: float = 600.0
    #: Restore from this savepoint instead of the latest checkpoint (a location: ``location.py``).
    savepoint: Location | None = None
    #: Where savepoints go when asked for without a path ('state.savepoints.dir').
    savepoint_dir: Location | None = None
    #: Reconcile the sinks with their commit logs on restore (``weir run``; the shell's jobs
    #: each start in a new state directory and append, as Flink's do).
    reconcile: bool = False
    #: Start over (--fresh): withdraw what the job published, even rows of an append-only
    #: table. Cleared once the first restore has done so.
    fresh: bool = False


class AlreadyFinished(Exception):
    """The job's latest checkpoint is its final one, and its output is committed."""

    def __init__(self, event: "CheckpointEvent"):
        super().__init__(f"job finished at checkpoint {event.checkpoint_id}")
        self.event = event


@dataclass
class _InFlight:
    checkpoint_id: int
    kind: str
    started: float
    thread: threading.Thread
    error: BaseException | None = None
    info: Any = None
    on_done: Callable[[CheckpointEvent], None] | None = None


@dataclass
class RestorePoint:
    """What one subtask needs to resume from a checkpoint or savepoint."""

    event: CheckpointEvent
    #: Source id -> its position: {"offsets", "split_watermarks", "finished_splits"}.
    sources: dict[str, dict]
    #: True when the checkpoint is the final one of a finished job.
    finished: bool
    #: Sink id -> every pre-committed handle to publish again; empty where another
    #: process (the parallel executor's coordinator) recovers the sinks.
    sink_handles: dict[str, list]
    #: Operator id -> the snapshots this subtask restores, cut to its key groups.
    states: Callable[[str], list]


def state_shape(kind: str, config: dict) -> dict | None:
    """What the state of an operator of ``kind`` depends on, as the operator declares it
    (``Operator.state_shape``); None for one without state (sources and sinks recover otherwise)."""
    declared = KINDS.get(kind)  # a checkpoint may name a kind this version no longer has
    return declared.state_shape(config) if declared is not None else None


def _differences(old: Any, new: Any, path: str) -> list[str]:
    """'keys was ["a"], is now ["b"]' for each part of a state shape that differs; into dicts."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for key in sorted(set(old) | set(new)) for d in _differences(old.get(key), new.get(key), f"{path}.{key}")]
    was, now = json.dumps(old, sort_keys=True), json.dumps(new, sort_keys=True)
    if max(len(was), len(now)) > 100:  # an encoded schema, a long list: say that it changed
        return [f"{path} changed"]
    return [f"{path} was {was}, is now {now}"]


def _shape_problem(operator_id: str, entry: dict, node: OperatorNode | None) -> str | None:
    """Why the state of ``operator_id`` saved as ``entry`` does not fit ``node`` (None: it fits)."""
    kind = entry.get("kind")
    saved = entry["state_shape"] if "state_shape" in entry else state_shape(kind, entry.get("config", {}))
    if saved is None:
        return None
    if node is None:
        return f"operator {operator_id} ({kind}) has state in the checkpoint but is no longer in the job"
    if node.kind != kind:
        return f"operator {operator_id} was a {kind} and is now a {node.kind}"
    shape = state_shape(node.kind, node.config) or {}
    changed = [d for key in sorted(set(shape) | set(saved)) for d in _differences(saved.get(key), shape.get(key), key)]
    if not changed:
        return None
    return f"the state of operator {operator_id} ({kind}) depends on its {', '.join(shape)}; " + "; ".join(changed)


class Coordinator:
    def __init__(self, graph: JobGraph, config: CheckpointConfig, *, warn: Callable[[str], None] = lambda m: None):
        self.graph = graph
        self.config = config
        self.warn = warn
        self.next_id = 1
        self.completed: list[CheckpointEvent] = []
        self._in_flight: _InFlight | None = None
        self._last = time.monotonic()
        self._batches = 0
        #: Savepoint requests waiting for the next boundary: (path or None, callback).
        self._savepoints: list[tuple[Location | None, Callable[[CheckpointEvent], None] | None]] = []
        #: The checkpoint this run resumed from, if any.
        self.restored: Checkpoint | None = None

    # -- restore -------------------------------------------------------------
    def restore_point(self, subtask: int = 0, parallelism: int = 1) -> RestorePoint | None:
        storage = self.config.storage
        if self.config.savepoint is not None:
            checkpoint = storage.open(self.config.savepoint)
        else:
            storage.discard_incomplete()
            checkpoint = storage.latest(warn=self.warn)
        # Number after every checkpoint directory on disk, readable or not, so a new id never meets an old one.
        self.next_id = max([self.next_id, *(checkpoint_id + 1 for checkpoint_id in storage.directory_ids())])
        if checkpoint is not None:
            meta = checkpoint.metadata
            event = CheckpointEvent(checkpoint.id, checkpoint.kind, checkpoint.size_bytes, 0.0, checkpoint.path)
            if meta.get("finished") and exists(checkpoint.path / COMMITTED_MARKER) \
                    and self.config.savepoint is None:
                self._refuse_changed_job(checkpoint)
                raise AlreadyFinished(event)
            self.check_compatible(checkpoint)
            self.next_id = max(self.next_id, int(meta["checkpoint_id"]) + 1)
        self._reconcile_sinks(checkpoint)
        if checkpoint is None:
            return None
        self.restored = checkpoint
        max_parallelism = int(self.graph.settings.get("pipeline.max-parallelism", 128))
        key_groups = range_for_subtask(subtask, parallelism, max_parallelism) if parallelism > 1 else None
        return RestorePoint(event, meta.get("sources", {}), bool(meta.get("finished")), _handles(meta),
                            lambda operator_id: checkpoint.operator_state(operator_id, key_groups, stream=True))

    def _refuse_changed_job(self, checkpoint: Checkpoint) -> None:
        if checkpoint.metadata.get("fingerprint") == self.graph.fingerprint():
            return
        raise EngineError(
            f"job {self.graph.name} finished at checkpoint {checkpoint.id} ({checkpoint.path}), and its SQL "
            "has changed since: the finished run's output is not this job's",
            hint="run it with --fresh to withdraw the finished run's output and run the changed job from the "
                 "start, or with another --state-dir (and other sinks) to keep both",
        )

    def _reconcile_sinks(self, checkpoint: Checkpoint | None) -> None:
        """Before any subtask writes: take back (or refuse) output the sinks' commit logs say
        checkpoints after the restore point published, then publish the restored checkpoint's
        own output (recorded in those logs first)."""
        finished = checkpoint is not None and bool(checkpoint.metadata.get("finished"))
        after = checkpoint.id if checkpoint is not None else 0
        handles = _handles(checkpoint.metadata) if checkpoint is not None else {}
        for node in self.graph.nodes:
            if not operator_class(node.kind).commits_output:
                continue
            sink = create_sink(node.connector_options(), node.output_schema)
            sink.job = self.graph.name
            if self.config.reconcile and not finished:  # nothing is published after a final checkpoint
                said = sink.withdraw(self.graph.name, after, fresh=self.config.fresh)
                if said:
                    self.warn(f"{said}: the job resumes from "
                              f"{'the start' if checkpoint is None else f'{checkpoint.kind} {after}'}")
            if checkpoint is not None:
                sink.recover(handles.get(node.id, []), checkpoint_id=checkpoint.id)
        self.config.fresh = False

    def check_compatible(self, checkpoint: Checkpoint) -> None:
        """Refuse a checkpoint whose operator state no longer fits the job, naming the operator
        and what its state depends on that changed (each operator declares it: ``state_shape``)."""
        saved = checkpoint.metadata.get("operators", {})
        nodes = {n.id: n for n in self.graph.nodes}
        problems = [problem for operator_id, entry in saved.items()
                    if (problem := _shape_problem(operator_id, entry, nodes.get(operator_id)))]
        if problems:
            raise EngineError(
                f"{checkpoint.kind} {checkpoint.id} at {checkpoint.path} does not fit this job: " + "; ".join(problems),
                hint="run the changed job with a new --state-dir (starting from the beginning), "
                     "or undo the change to resume",
            )

    # -- triggering ------------------------------------------------------------
    def request_savepoint(self, path: "Location | str | None" = None,
                          on_done: Callable[[CheckpointEvent], None] | None = None):
        self._savepoints.append((path, on_done))

    def on_batch(self) -> None:
        self._batches += 1

    def due(self) -> str | None:
        """'savepoint', 'checkpoint' or None at this batch boundary."""
        if self._in_flight is not None:
            return None
        if self._savepoints:
            return "savepoint"
        if self.config.interval_batches and self._batches >= self.config.interval_batches:
            return "checkpoint"
        if self.config.interval and time.monotonic() - self._last >= self.config.interval:
            return "checkpoint"
        return None

    def take(self, kind: str, sources: dict[str, dict], snapshots: dict[str, dict[int, Any]],
             sink_handles: dict[str, dict[int, list]], *, finished: bool = False, parallelism: int = 1,
             checkpoint_id: int | None = None) -> int:
        """Steps 1–3: record what the subtasks handed over at barrier n and write it in the background.

        ``snapshots``: operator id -> subtask -> state; ``sink_handles``: sink id ->
        subtask -> every handle pre-committed and not yet committed."""
        if checkpoint_id is None:
            checkpoint_id = self.next_id
        self.next_id = max(self.next_id, checkpoint_id + 1)
        self._batches, self._last = 0, time.monotonic()
        path, on_done = (self._savepoints.pop(0) if kind == "savepoint" else (None, None))
        if kind == "savepoint" and path is None and self.config.savepoint_dir is not None:
            path = self.config.savepoint_dir / f"savepoint-{checkpoint_id}"
        writer = self.config.storage.writer(checkpoint_id, kind=kind, path=path)
        metadata = {
            "checkpoint_id": checkpoint_id,
            "job": self.graph.name,
            "fingerprint": self.graph.fingerprint(),
            "finished": finished,
            "parallelism": parallelism,
            "max_parallelism": int(self.graph.settings.get("pipeline.max-parallelism", 128)),
            "sources": sources,
            "sinks": {sink_id: {str(i): handles for i, handles in by_subtask.items()}
                      for sink_id, by_subtask in sink_handles.items()},
            "operators": {},
        }
        nodes = {n.id: n for n in self.graph.nodes}

        def write() -> None:
            for operator_id, by_subtask in snapshots.items():
                node = nodes[operator_id]
                for subtask, state in by_subtask.items():
                    if state is not None:
                        writer.write_state(operator_id, subtask, state)
                    faults.reach("snapshot-write")
                metadata["operators"][operator_id] = {
                    "kind": node.kind, "config": node.config_json(), "state_shape": state_shape(node.kind, node.config),
                }
            faults.reach("before-metadata")
            flight.info = writer.commit(metadata)
            faults.reach("after-metadata")

        def guarded() -> None:
            try:
                write()
            except BaseException as error:  # reported on the main thread by poll()
                flight.error = error
                writer.abort()
                discard_staged(snapshots)  # the staged tables the writer had not yet moved

        thread = threading.Thread(target=guarded, name=f"checkpoint-{checkpoint_id}", daemon=True)
        flight = _InFlight(checkpoint_id, kind, time.monotonic(), thread, on_done=on_done)
        self._in_flight = flight
        thread.start()
        return checkpoint_id

    def poll(self, commit: Callable[[int], None], *, wait: bool = False) -> CheckpointEvent | None:
        """Step 4: if the checkpoint in flight is durable, commit its output and report it."""
        flight = self._in_flight
        if flight is None:
            return None
        # A checkpoint due by batch count ('weir.checkpointing.interval-batches', for tests) waits for
        # the one in flight, so that checkpoint n is taken at the same boundary however fast the disk.
        if wait or (self.config.interval_batches and self._batches >= self.config.interval_batches):
            flight.thread.join()
        elif flight.thread.is_alive():
            return None
        self._in_flight = None
        if flight.error is not None:
            self.warn(f"checkpoint {flight.checkpoint_id} failed and was discarded: {flight.error}")
            return None
        info = flight.info
        commit(flight.checkpoint_id)
        event = CheckpointEvent(flight.checkpoint_id, flight.kind, getattr(info, "size_bytes", 0),
                                time.monotonic() - flight.started, info.path if info is not None else Path())
        self.completed.append(event)
        if flight.on_done is not None:
            flight.on_done(event)
        return event

    def settle(self) -> None:
        """Wait for a checkpoint still being written (a failing job calls this before a
        restart, so that the restart never cleans up a directory still being written)."""
        if self._in_flight is not None:
            self._in_flight.thread.join()

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    def mark_committed(self, event: CheckpointEvent) -> None:
        """The final checkpoint's output is committed: a new run starts afresh."""
        write_atomically(event.path / COMMITTED_MARKER, b"")
        faults.reach("output-committed")


def _handles(meta: dict) -> dict[str, list]:
    """Sink id -> every handle the checkpoint's subtasks pre-committed."""
    return {sink_id: [h for subtask_handles in by_subtask.values() for h in subtask_handles]
            for sink_id, by_subtask in meta.get("sinks", {}).items()}

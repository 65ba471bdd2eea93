"""One worker of a parallel job: subtask i of every operator, with channels to the others.

What each task does with a batch, a watermark or a barrier is ``task.Task``'s,
the same code the local executor drives; this module is the driver that moves
what the tasks emit over channels, gathers exchanged rows (``_flush``) and
injects the coordinator's barriers.

The worker reads its share of the source splits (``SourceReader`` with
subtask and parallelism), pushes each batch depth first through its
operators, and at an exchange edge (``exchange.routing``) keeps its own part
and queues the others for the workers owning them. Each task (an operator in
this worker) has input channels, one per upstream subtask at an exchange;
its watermark is the minimum over them, so it never passes a row still on its
way from another worker.

Checkpoint n, with aligned barriers (Chandy–Lamport, as in Flink):

1. The coordinator asks every worker for barrier n. At its next batch boundary
   the worker *injects* it: each source records its splits' offsets and
   watermarks and passes the barrier to its consumers.
2. A task passes barrier n once n has arrived on every input channel (a
   channel that ended counts; ``BarrierAligner``). Until then a channel that
   delivered n is blocked: what it brings is buffered, since it belongs after
   the snapshot. Passing n: the task snapshots its operator (a sink
   pre-commits), sends n down every output channel, then drains its buffers.
3. A task that has finished (every input ended) takes part with its final
   state, which no later input can change.
4. When every task of the worker has passed n, the worker sends the lot to
   the coordinator; when the coordinator has written n it sends ``complete``
   and the worker commits its sinks' output.

At the end of the input every task finishes once all its channels have
ended, and the worker tells the coordinator so (``finished``). Once every
worker has, the coordinator numbers the final checkpoint f and asks for it
(``final``); the worker sends its final snapshot (its sinks pre-commit under f)
and, once the coordinator has written it, commits and reports its metrics. A
worker pre-commits its sinks only at a checkpoint the coordinator numbered: a
checkpoint or savepoint whose barrier reaches a finished worker (sent before
the coordinator heard it had finished) carries its last output under that
checkpoint's own id, which a sink's commit log records (a restore from it
must not take that output back as published after it).

Backpressure. An outbox (the bytes queued for one peer) holds at most
``'weir.exchange.buffer-size'``: past it the worker reads no source batch, and a
task sending more — a window firing millions of rows, rows received and passed
on — waits where it sends (``_backpressure``) until the peer has read enough.
While it waits the worker keeps doing what peers need of it, so that no wait
is circular:

1. It keeps reading every incoming pipe: a peer waiting on this worker always
   gets its messages read (two workers sending to each other both make way).
2. What it reads for a task not in the middle of a call is handled at once (that
   task may send and wait in turn: a nested wait, at most one per task). What it
   reads for a task that is (the one waiting, or one below it on the stack) is
   *deferred* — kept in order per task and handled once the call is over
   (``_replay``): calling an operator in the middle of its own firing is not safe.
3. Barriers read are aligned like any message, so a checkpoint goes on through
   a backpressured job; the coordinator's requests are kept for the main loop,
   except ``cancel``, which ends the wait at once. A dead peer's outbox counts
   as empty (its sends fail); the coordinator sees the death and ends the job.
"""
from __future__ import annotations

import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

import pyarrow as pa

from weir.engine import faults
from weir.engine.checkpoint.alignment import CheckpointAbort
from weir.engine.checkpoint.coordinator import RestorePoint
from weir.engine.checkpoint.location import parse_location
from weir.engine.checkpoint.staging import upload_staged
from weir.engine.checkpoint.reader import Checkpoint, read_metadata
from weir.engine.connectors.options import parse_size
from weir.engine.errors import JobCancelled
from weir.engine.messages import MAX_WATERMARK, MIN_WATERMARK, Barrier
from weir.engine.runtime.exchange import (
    BARRIER, BROADCAST, DATA, END, KEY_GROUP_COLUMN, SAVEPOINT_BARRIER, WATERMARK, Decoder, Encoder, Outbox,
    carries_key_groups, needed_columns, routing, select_columns, split, split_by_key_group, pre_aggregated, widen,
)
from weir.engine.runtime.local import JobResult, LocalExecutor
from weir.engine.runtime.task import Task
from weir.engine.state.key_groups import range_for_subtask

#: Read no new source batch while this many bytes wait to be sent to one peer (the default).
OUTBOX_LIMIT = "32MB"
#: Source steps after which a task fed by an exchange hands over what it gathered (see ``_flush``).
FLUSH_STEPS = 4
#: Messages taken from one peer before the worker looks at its own sources again.
RECEIVE_BURST = 16
#: Seconds a send waiting for a full outbox sleeps when no peer has anything for it.
BACKPRESSURE_POLL = 0.005


@dataclass
class _Route:
    consumer: Task
    input_index: int
    #: None (forward), BROADCAST, or the hash keys.
    keys: tuple[str, ...] | str | None
    #: The consumer's first channel for this input.
    offset: int
    #: The columns that cross the exchange (None: all; see ``exchange.needed_columns``).
    columns: list[str] | None = None
    #: The rows' key groups go along (``exchange.carries_key_groups``).
    with_key_groups: bool = False
    #: The upstream's output port the edge reads (``engine.graph.LATE_ROWS_PORT`` for late rows).
    port: int = 0
    #: Rows become the consumer's partial aggregates before they cross (``WindowAggregate.pre_aggregate``).
    combine: bool = False


@dataclass
class _Inputs:
    """What this driver gathers for a task from its exchange channels (see ``_flush``); the
    channels' watermarks, barrier alignment and held-back messages are the ``Task``'s."""

    #: Input index -> rows from exchange channels not yet given to the operator (see ``_flush``).
    pending: dict[int, list] = field(default_factory=dict)
    pending_rows: int = 0
    #: The minimum over the channels' watermarks, once it has passed the operator's.
    watermark_due: int = MIN_WATERMARK
    #: The worker's source step at the last flush.
    flushed_at: int = 0
    #: Inputs whose channels come from every worker.
    exchanged: frozenset = frozenset()


@dataclass
class _Record:
    """What this worker hands over for checkpoint n."""

    kind: str
    passed: set[str] = field(default_factory=set)
    sources: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)
    #: The coordinator's request reached this worker (a barrier from a peer may come first).
    injected: bool = False


class SubtaskExecutor(LocalExecutor):
    def __init__(self, graph, *, subtask: int, parallelism: int, control: Connection,
                 peers_in: dict[int, Connection], peers_out: dict[int, Connection],
                 restore_from: str | None = None, state_backend: str = "duckdb", spill_dir: str | None = None,
                 stage_to: str | None = None):
        super().__init__(graph, subtask=subtask, parallelism=parallelism, state_backend=state_backend,
                         spill_dir=spill_dir, sinks_prepared=True)
        self.conn = control
        #: Where this worker uploads its staged state tables before it sends a snapshot (the checkpoint
        #: storage, as a URI or shared path: it runs on another node than the driver); None: the
        #: driver moves them from this worker's spill directory (``engine.checkpoint.staging``).
        self.stage_to = stage_to
        self.peers_in = dict(peers_in)
        self.decoders = {j: Decoder(conn) for j, conn in peers_in.items()}
        for conn in [*peers_in.values(), *peers_out.values()]:
            widen(conn)
        self.outboxes = {j: Outbox(conn, f"weir-send-{subtask}-{j}") for j, conn in peers_out.items()}
        self.encoders = {j: Encoder() for j in peers_out}
        #: The checkpoint to restore this subtask's key groups from (read here, not sent: see parallel.py).
        self._restore_from = restore_from
        self.max_parallelism = int(graph.settings.get("pipeline.max-parallelism", 128))
        #: Rows gathered from exchange channels before an operator sees them: two source batches
        #: worth (measured on the tumble bench: 1x calls the operators too often, 4x is slower again).
        self.coalesce_rows = 2 * int(graph.settings.get("weir.source.batch-size", 65536))
        self.outbox_limit = parse_size("weir.exchange.buffer-size",
                                       graph.settings.get("weir.exchange.buffer-size", OUTBOX_LIMIT))
        self._records: dict[int, _Record] = {}
        #: Task id -> how deep it is in a call on this stack (``_busy``), and what came for it meanwhile.
        self._calls: dict[str, int] = {}
        self._deferred: dict[str, deque] = {}
        #: The coordinator's messages read while waiting in ``_backpressure``, for ``_control``.
        self._backlog: list = []
        #: How often a send waited for a full outbox (``JobResult.backpressure_waits``).
        self.backpressure_waits = 0
        self._to_inject: list[tuple[int, str]] = []
        #: A checkpoint whose barrier this worker's sources hold back (fault point ``inject``:
        #: a stalled source); they read nothing until it is aborted.
        self._held: int | None = None
        #: This worker's sources read nothing more in this run (fault point ``batch`` with ``:stall``):
        #: the job cannot end, while checkpoints go on, until the run fails (a test kills a node).
        self._paused = False
        #: Every task has finished and the coordinator was told so (it then asks for the final checkpoint).
        self._finished_sent = False
        self._final_committed = False
        self._streams: dict[str, object] = {}
        #: The coordinator counts batches for 'weir.checkpointing.interval-batches': report every step.
        self._progress_every = 0.0 if graph.settings.get("weir.checkpointing.interval-batches") else 0.1

    # -- setup ---------------------------------------------------------------------
    def _wire(self) -> None:
        self._order = list(self.tasks.values())
        for index, task in enumerate(self._order):
            task.wire = index
            task.routes = []
            task.emit = lambda batches, port=0, task=task: self._output(task, batches, port)
            task.forward = lambda watermark, task=task: self._control_out(task, WATERMARK, watermark)
            if not task.node.inputs:
                task.inputs = None
                continue
            input_of, offsets, exchanged = [], [], set()
            for i, edge in enumerate(task.node.inputs):
                offsets.append(len(input_of))
                width = 1 if routing(task.node, edge) is None else self.parallelism
                input_of += [i] * width
                if width > 1:
                    exchanged.add(i)
            task.offsets = offsets
            task.wire_channels(input_of)
            task.inputs = _Inputs(exchanged=frozenset(exchanged))
        for task in self._order:
            for i, edge in enumerate(task.node.inputs):
                keys = routing(task.node, edge)
                schema = self.tasks[edge.source].node.output_schema
                columns = None if keys is None else needed_columns(task.node, schema)
                if columns is not None and keys != BROADCAST:
                    columns = [n for n in schema.names if n in columns or n in keys]
                carry = keys not in (None, BROADCAST) and carries_key_groups(task.node, keys)
                # A window aggregate keyed by the exchange's keys: its partials' key groups are the rows'.
                combine = pre_aggregated(task.node, edge, self.graph.settings)
                if combine:
                    columns, carry = None, False
                    task.partials.add(i)
                self.tasks[edge.source].routes.append(_Route(task, i, keys, task.offsets[i], columns, carry,
                                                             edge.port, combine))

    # -- the job ---------------------------------------------------------------------
    def run(self) -> JobResult:
        self._build()
        self._wire()
        started = self._started = time.perf_counter()
        operators = [t for t in self._order if t.operator is not None]
        try:
            if self._restore_from is not None:
                path = parse_location(self._restore_from)
                checkpoint = Checkpoint(path, read_metadata(path, "checkpoint"))  # verified by the coordinator
                key_groups = range_for_subtask(self.subtask, self.parallelism, self.max_parallelism)
                self._restore(RestorePoint(None, checkpoint.metadata.get("sources", {}), False, {},
                                           lambda operator_id: checkpoint.operator_state(operator_id, key_groups,
                                                                                           stream=True)))
            for task in self.tasks.values():
                if task.kind.commits_output:
                    task.operator.resuming = True
            for task in operators:
                self._call(task, task.operator.open)
            self._streams = {t.node.id: iter(t.reader) for t in self._order if t.reader}
            self._loop()
        finally:
            for task in operators:
                task.operator.close()
        if self._final_committed:
            faults.reach("shutdown")
            for outbox in self.outboxes.values():
                outbox.close()
        result = self._result(time.perf_counter() - started)
        result.backpressure_waits = self.backpressure_waits
        return result

    def _loop(self) -> None:
        next_progress = 0.0
        while not self._final_committed:
            self._control()
            if self._stop_requested or self._final_committed:
                return
            while self._to_inject:
                self._inject(*self._to_inject.pop(0))
            self._replay()
            self._receive()
            self._replay()
            if self._streams and self._room() and self._held is None and not self._paused:
                self._read_step()
                self._flush_all(older_than=FLUSH_STEPS)
                if faults.reach("batch"):  # ':stall'
                    self._paused = True
                if time.perf_counter() >= next_progress:
                    self._progress()
                    next_progress = time.perf_counter() + self._progress_every
                continue
            if self._flush_all():
                continue  # nothing to read: hand over what was gathered before waiting
            if not self._finished_sent and all(t.finished for t in self._order):
                self._progress()
                self._finished_sent = True
                self.conn.send(("finished", self.subtask))
            # Nothing to read: wait for a peer or the coordinator (briefly, if only the outboxes are full).
            timeout = 0.002 if self._streams and not self._paused else 1.0
            wait([*self.peers_in.values(), self.conn], timeout=timeout)

    def _room(self) -> bool:
        return all(o.pending_bytes < self.outbox_limit for o in self.outboxes.values())

    def _read_step(self) -> None:
        self.step += 1
        for node_id in list(self._streams):
            task = self.tasks[node_id]
            step = self._call(task, next, self._streams[node_id], None)
            if step is None:
                del self._streams[node_id]
                self._finish(task)
                continue
            batch, watermark = step
            if batch is not None:
                self._output(task, [batch])
            if watermark is not None and watermark.timestamp > task.watermark:
                task.advance(watermark.timestamp)

    # -- the coordinator ----------------------------------------------------------------
    def _control(self) -> None:
        while self._backlog or self.conn.poll():
            message = self._backlog.pop(0) if self._backlog else self.conn.recv()
            kind = message[0]
            if kind == "barrier":
                self._to_inject.append((message[1], message[2]))
            elif kind == "final":
                self._send_final(message[1])
            elif kind == "complete":
                checkpoint_id, final = message[1], message[2]
                self.commit(checkpoint_id)  # (LocalExecutor.commit: every sink task's)
                if final:
                    self._final_committed = True
            elif kind == "abort":
                self._abort(message[1])
            elif kind == "stop":
                self._stop_requested = True
            elif kind == "cancel":
                raise JobCancelled(f"job {self.graph.name} was cancelled")

    def _progress(self) -> None:
        readers = [t.reader for t in self._order if t.reader]
        watermark = min((t.watermark for t in self._order if t.reader), default=MIN_WATERMARK)
        self.conn.send(("progress", self.subtask, self.step, sum(r.rows_read for r in readers), watermark))

    def _send_final(self, checkpoint_id: int) -> None:
        """The final checkpoint, numbered by the coordinator once every worker has finished."""
        sources, snapshots, handles = self.barrier(checkpoint_id, finished=True)
        self.conn.send(("snapshot", self.subtask, checkpoint_id, "checkpoint", True, sources,
                        self._staged(snapshots), handles))

    # -- checkpoints ----------------------------------------------------------------------
    def _inject(self, checkpoint_id: int, kind: str) -> None:
        """Barrier n enters this worker at its sources; finished tasks take part as they are."""
        if faults.reach("inject"):  # ':stall': the sources hold barrier n back until it is aborted
            self._held = checkpoint_id
            return
        record = self._records.setdefault(checkpoint_id, _Record(kind))
        barrier = Barrier(checkpoint_id, kind == "savepoint")
        record.injected = True
        for task in self._order:
            if task.finished and task.node.id not in record.passed:
                self._snapshot(task, checkpoint_id)
        for task in self._order:
            if task.reader is not None and task.node.id not in record.passed:
                self._snapshot(task, checkpoint_id)
                self._control_out(task, SAVEPOINT_BARRIER if barrier.is_savepoint else BARRIER, checkpoint_id)
        self._maybe_done(checkpoint_id)

    def _abort(self, checkpoint_id: int) -> None:
        """The coordinator aborted checkpoint n (it expired): forget this worker's part of it,
        release every channel blocked for its barrier and process what they held back. A
        sink's pre-commit of n stays pending: the next completed checkpoint commits it."""
        self._to_inject = [(n, kind) for n, kind in self._to_inject if n != checkpoint_id]
        self._records.pop(checkpoint_id, None)
        if self._held == checkpoint_id:
            self._held = None
        for task in self._order:
            if task.inputs is not None and task.aligner.abort(checkpoint_id):
                self._drain(task)

    def _snapshot(self, task: Task, checkpoint_id: int) -> None:
        record = self._records[checkpoint_id]
        state = task.snapshot(checkpoint_id)
        if task.reader is not None:
            record.sources[task.node.id] = state
        elif not task.kind.commits_output:
            record.snapshots[task.node.id] = state
        record.passed.add(task.node.id)

    def _maybe_done(self, checkpoint_id: int) -> None:
        record = self._records.get(checkpoint_id)
        if record is None or not record.injected or len(record.passed) < len(self._order):
            return
        del self._records[checkpoint_id]
        self.conn.send(("snapshot", self.subtask, checkpoint_id, record.kind, False, record.sources,
                        self._staged(record.snapshots), self.uncommitted))

    def _staged(self, snapshots: dict) -> dict:
        """``snapshots`` as the driver can take them: run remotely, staged tables uploaded first."""
        return snapshots if self.stage_to is None else upload_staged(snapshots, self.stage_to)

    def _pass_barrier(self, task: Task, barrier: Barrier) -> None:
        n = barrier.checkpoint_id
        self._records.setdefault(n, _Record("savepoint" if barrier.is_savepoint else "checkpoint"))
        self._flush(task)
        self._snapshot(task, n)
        self._control_out(task, SAVEPOINT_BARRIER if barrier.is_savepoint else BARRIER, n)
        self._drain(task)
        self._maybe_done(n)

    def _drain(self, task: Task) -> None:
        for channel, buffer in enumerate(task.buffers):
            while buffer and not task.is_blocked(channel):
                kind, value = buffer.popleft()
                self._handle(task, channel, kind, value)

    # -- channels -----------------------------------------------------------------------
    def _receive(self) -> None:
        ready = wait(list(self.peers_in.values()), timeout=0)
        for conn in ready:
            # (A send below may wait and read this pipe meanwhile, to its end: see _backpressure.)
            peer = next((j for j, c in self.peers_in.items() if c is conn), None)
            for _ in range(RECEIVE_BURST if peer is not None else 0):
                try:
                    kind, wire, input_index, value = self.decoders[peer].receive()
                except (EOFError, OSError):
                    self.peers_in.pop(peer, None)  # the peer finished (or died: the coordinator sees that)
                    break
                task = self._order[wire]
                self._deliver(task, task.offsets[input_index] + peer, kind, value)
                if not conn.poll():
                    break

    def _deliver(self, task: Task, channel: int, kind: int, value) -> None:
        deferred = self._deferred.get(task.node.id)
        if deferred or self._calls.get(task.node.id):
            # The task is in the middle of a call (waiting to send, see _backpressure): after it.
            self._deferred.setdefault(task.node.id, deque()).append((channel, kind, value))
            return
        self._deliver_now(task, channel, kind, value)

    def _deliver_now(self, task: Task, channel: int, kind: int, value) -> None:
        if task.is_blocked(channel):
            task.buffers[channel].append((kind, value))
        else:
            self._handle(task, channel, kind, value)

    def _handle(self, task: Task, channel: int, kind: int, value) -> None:
        with self._busy(task):
            self._handle_now(task, channel, kind, value)

    def _handle_now(self, task: Task, channel: int, kind: int, value) -> None:
        inputs = task.inputs
        if kind == DATA:
            index = task.input_of[channel]
            if index not in inputs.exchanged:
                task.process(value, index)
                return
            inputs.pending.setdefault(index, []).append(value)
            inputs.pending_rows += value.num_rows
            if inputs.pending_rows >= self.coalesce_rows:
                self._flush(task)
        elif kind == WATERMARK:
            self._channel_watermark(task, channel, value)
        elif kind in (BARRIER, SAVEPOINT_BARRIER):
            try:
                aligned = task.on_barrier(channel, Barrier(value, kind == SAVEPOINT_BARRIER))
            except CheckpointAbort as abort:
                # An upstream task skipped the pending barrier (its worker heard of the abort
                # first): the aligner moved on; the coordinator aborted that checkpoint already.
                self._records.pop(abort.checkpoint_id, None)
                self._drain(task)
                return
            if aligned is not None:
                self._pass_barrier(task, aligned)
            elif task.aligner.pending is not None:
                faults.reach("align")  # some channels delivered the barrier, not yet all
        elif kind == END:
            self._channel_watermark(task, channel, MAX_WATERMARK)
            aligned = task.on_end_of_input(channel)
            if aligned is not None:
                self._pass_barrier(task, aligned)
            if task.all_ended and not task.finished:
                self._finish(task)  # (draining after the barrier above may have finished it)

    def _flush(self, task: Task) -> None:
        """Hand the operator the rows gathered from exchange channels — one batch per input —
        and then the watermark they have reached.

        An exchange cuts every source batch into N parts and the channels' watermarks take
        turns at being the minimum; called for each, an operator (whose cost is mostly per
        call) would work N times as often as at parallelism 1. So a task fed by an exchange
        gathers rows and watermark until it holds two source batches' worth of rows, the
        worker has read ``FLUSH_STEPS`` source steps, has nothing else to do, or a barrier or
        the end comes. Rows are always processed before the watermark that follows them, and a
        watermark applied later can only find fewer rows late, never more."""
        with self._busy(task):
            self._flush_now(task)

    def _flush_now(self, task: Task) -> None:
        inputs = task.inputs
        inputs.flushed_at = self.step
        if inputs.pending_rows:
            pending, inputs.pending, inputs.pending_rows = inputs.pending, {}, 0
            for index, batches in sorted(pending.items()):
                task.process(batches[0] if len(batches) == 1 else pa.concat_batches(batches), index)
        if inputs.watermark_due > task.watermark:
            task.advance(inputs.watermark_due)

    def _due(self, task: Task) -> bool:
        inputs = task.inputs
        return inputs is not None and bool(inputs.pending_rows or inputs.watermark_due > task.watermark)

    def _flush_all(self, *, older_than: int = 0) -> bool:
        """Flush every task with something gathered (upstream first); True if any had."""
        flushed = False
        for task in self._order:
            if self._due(task) and self.step - task.inputs.flushed_at >= older_than:
                self._flush(task)
                flushed = True
        return flushed

    def _channel_watermark(self, task: Task, channel: int, watermark: int) -> None:
        combined = task.combine(channel, watermark)
        if combined is None:
            return
        if task.inputs.exchanged:
            task.inputs.watermark_due = max(task.inputs.watermark_due, combined)  # applied by _flush
        else:
            task.advance(combined)

    def _finish(self, task: Task) -> None:
        """Every input of ``task`` ended: flush it, take part in open checkpoints with its
        final state, and end its output channels."""
        with self._busy(task):
            self._finish_now(task)

    def _finish_now(self, task: Task) -> None:
        task.finished = True
        if task.inputs is not None:
            self._flush(task)
        task.finish()
        for checkpoint_id, record in list(self._records.items()):
            if task.node.id not in record.passed:
                self._snapshot(task, checkpoint_id)
        self._control_out(task, END, 0)
        for checkpoint_id in list(self._records):
            self._maybe_done(checkpoint_id)

    def _output(self, task: Task, batches: list[pa.RecordBatch], port: int = 0) -> None:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if port == 0:
                task.metrics.rows_out += batch.num_rows
            for route in task.routes:
                if route.port != port:
                    continue
                if route.keys is None:
                    self._deliver(route.consumer, route.offset, DATA, batch)
                    continue
                sent = batch if route.columns is None else select_columns(batch, route.columns)
                if route.keys == BROADCAST:
                    for j in range(self.parallelism):
                        self._send(j, route, DATA, sent)
                else:
                    if route.combine:
                        route.consumer.metrics.rows_in += batch.num_rows
                        partials = self._call(route.consumer, route.consumer.operator.pre_aggregate, batch)
                        parts = split_by_key_group(partials, partials.column(KEY_GROUP_COLUMN),
                                                   self.parallelism, self.max_parallelism)
                    else:
                        parts = split(sent, route.keys, self.parallelism, self.max_parallelism,
                                      route.with_key_groups)
                    for j, part in enumerate(parts):
                        if part.num_rows:
                            self._send(j, route, DATA, part)

    def _control_out(self, task: Task, kind: int, value: int) -> None:
        """A watermark, barrier or end of input down every output channel of ``task``."""
        for route in task.routes:
            if route.keys is None:
                self._deliver(route.consumer, route.offset, kind, value)
            else:
                for j in range(self.parallelism):
                    self._send(j, route, kind, value)

    def _send(self, subtask: int, route: _Route, kind: int, value) -> None:
        if subtask == self.subtask:
            self._deliver(route.consumer, route.offset + subtask, kind, value)
            return
        outbox = self.outboxes[subtask]
        if kind == DATA:
            outbox.put(self.encoders[subtask].data(route.consumer.wire, route.input_index, value))
        else:
            outbox.put(self.encoders[subtask].control(kind, route.consumer.wire, route.input_index, value))
        if outbox.pending_bytes > self.outbox_limit:
            self._backpressure(outbox)

    # -- backpressure (see the module's docstring) ------------------------------------------
    @contextmanager
    def _busy(self, task: Task):
        """``task`` is in a call on this stack: what arrives for it meanwhile is deferred."""
        key = task.node.id
        self._calls[key] = self._calls.get(key, 0) + 1
        try:
            yield
        finally:
            self._calls[key] -= 1

    def _backpressure(self, outbox: Outbox) -> None:
        """Wait until ``outbox`` is back within the bound, reading every peer meanwhile."""
        self.backpressure_waits += 1
        while outbox.pending_bytes > self.outbox_limit and not outbox.broken:
            while self.conn.poll():
                message = self.conn.recv()
                if message[0] == "cancel":
                    raise JobCancelled(f"job {self.graph.name} was cancelled")
                self._backlog.append(message)
            self._receive()
            if outbox.pending_bytes > self.outbox_limit and not outbox.broken:
                wait([*self.peers_in.values(), self.conn], timeout=BACKPRESSURE_POLL)

    def _replay(self) -> None:
        """Handle, in order, what was deferred for tasks no longer in a call."""
        while any(self._deferred.values()):
            for task in self._order:
                deferred = self._deferred.get(task.node.id)
                while deferred and not self._calls.get(task.node.id):
                    self._deliver_now(task, *deferred.popleft())


"""One task: subtask i of one operator (or source), and the logic around it that
every executor shares.

An executor is a *driver*: it builds the tasks, moves what they emit to where
it goes (a depth-first call in ``LocalExecutor``, channels between processes
in ``SubtaskExecutor``; a distributed executor would be a third driver) and
decides when barriers enter. What a task does with what arrives is written
here, once:

1. A batch from input i goes to the operator's ``process_batch`` in
   ``Task.process`` — the one place an operator receives rows — and what it
   returns goes to ``Task.emit`` (port 0; rows the operator dropped as late go
   to ``LATE_ROWS_PORT``, for the source's late-rows table).
2. A task's input is one *channel* per upstream subtask (one, where the edge
   stays in the process). ``combine`` records a channel's watermark and
   returns the task's new watermark, the minimum over its channels, when that
   has passed the task's; ``advance`` gives it to the operator
   (``process_watermark``) and forwards ``operator.output_watermark(w)`` —
   an interval join holds its watermark back by the reach of its interval, at
   every parallelism.
3. Barrier ``n`` from a channel goes to the task's ``BarrierAligner``
   (``on_barrier``, ``on_end_of_input``): it returns the barrier once every
   channel has delivered it, and until then says which channels are blocked
   (``is_blocked``: the driver buffers what they bring in ``buffers``).
4. Passing a barrier, the task takes its part of checkpoint ``n`` with
   ``snapshot``: a source's position, a copy of an operator's state, or a
   sink's pre-committed output (kept in ``uncommitted`` until ``commit``).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa

from weir.engine.checkpoint.alignment import BarrierAligner
from weir.engine.errors import EngineError
from weir.engine.graph import LATE_ROWS_PORT, OperatorNode
from weir.engine.messages import MIN_WATERMARK, Barrier
from weir.engine.operators.base import Operator, OperatorContext, OperatorKind
from weir.engine.operators.registry import operator_class
from weir.engine.runtime.source_reader import SourceReader
from weir.engine.watermarks import for_operator


@dataclass
class OperatorMetrics:
    id: str
    kind: str
    rows_in: int = 0
    rows_out: int = 0
    counters: dict[str, int] = field(default_factory=dict)
    #: Rows dropped as late, per source table ('a+b' for rows of a join of a and b).
    late_by_source: dict[str, int] = field(default_factory=dict)


def _discard(*args) -> None:
    return None


class Task:
    """One operator of one subtask: its channels' watermarks and barriers, and the calls into it."""

    def __init__(self, node: OperatorNode, ctx: OperatorContext, operator: Operator | None,
                 reader: SourceReader | None):
        self.node = node
        self.ctx = ctx
        self.operator = operator
        self.reader = reader
        #: The class declaring what the task's operator is (``OperatorKind``: keyed, a sink, ...).
        self.kind: type[OperatorKind] = operator_class(node.kind)
        self.metrics = OperatorMetrics(node.id, node.kind)
        #: The task's watermark: the minimum over its channels' (a source's: its own).
        self.watermark = MIN_WATERMARK
        #: Where emitted batches go: ``emit(batches, port)``, set by the driver.
        self.emit: Callable[[list[pa.RecordBatch], int], None] = _discard
        #: Where the forwarded watermark goes: ``forward(watermark)``, set by the driver.
        self.forward: Callable[[int], None] = _discard
        #: Inputs whose rows were counted where they were pre-aggregated (not again here).
        self.partials: set[int] = set()
        #: A sink's pre-committed handles not yet committed, with the checkpoint of each.
        self._pre_commits: list[tuple[int, Any]] = []
        self.finished = False
        self.wire_channels(list(range(len(node.inputs))) or [0])  # one channel per input (a source: its own)

    def wire_channels(self, input_of: list[int]) -> None:
        """The task's channels: ``input_of[c]`` is the input that channel c belongs to."""
        self.input_of = input_of
        self.channel_watermarks = [MIN_WATERMARK] * len(input_of)
        self.aligner = BarrierAligner(len(input_of))
        #: Per channel: what a blocked channel delivered, in order, for after the barrier.
        self.buffers: list[deque] = [deque() for _ in input_of]
        self.ended: set[int] = set()

    # -- calls into the operator ------------------------------------------------------
    def call(self, method, *args):
        """Call into the operator, naming it in any error; late rows it dropped go out at once."""
        out = self.call_for(self.node, method, *args)
        if self.ctx.late_output:  # rows the operator dropped as late, for its source's late-rows table
            late, self.ctx.late_output = self.ctx.late_output, []
            self.emit(late, LATE_ROWS_PORT)
        return out

    @staticmethod
    def call_for(node: OperatorNode, method, *args):
        try:
            return method(*args)
        except EngineError as error:
            error.operator_id = error.operator_id or node.id
            raise
        except Exception as error:  # an operator bug or a DuckDB error in generated SQL
            raise EngineError(f"{node.kind} failed: {error}", operator_id=node.id) from error

    def process(self, batch: pa.RecordBatch, index: int) -> None:
        """Step 1: rows from input ``index`` into the operator."""
        if index not in self.partials:
            self.metrics.rows_in += batch.num_rows
        self.emit(self.call(self.operator.process_batch, for_operator(self.operator, batch), index), 0)

    # -- watermarks ---------------------------------------------------------------------
    def combine(self, channel: int, watermark: int) -> int | None:
        """Step 2: ``channel`` reached ``watermark``; the task's new watermark if it moved past its own."""
        if watermark <= self.channel_watermarks[channel]:
            return None
        self.channel_watermarks[channel] = watermark
        combined = min(self.channel_watermarks)
        return combined if combined > self.watermark else None

    def advance(self, watermark: int) -> None:
        """Step 2: the task's watermark is ``watermark``: fire what it completes, forward what the operator allows."""
        self.watermark = watermark
        forwarded = watermark
        if self.operator is not None:
            self.emit(self.call(self.operator.process_watermark, watermark), 0)
            forwarded = self.operator.output_watermark(watermark)
        self.forward(forwarded)

    # -- barriers -------------------------------------------------------------------------
    def is_blocked(self, channel: int) -> bool:
        return self.aligner.is_blocked(channel)

    def on_barrier(self, channel: int, barrier: Barrier) -> Barrier | None:
        """Step 3: the barrier, once every channel has delivered it (snapshot and forward it then)."""
        return self.aligner.on_barrier(channel, barrier)

    def on_end_of_input(self, channel: int) -> Barrier | None:
        """Step 3: ``channel`` ended (it counts as aligned from now on); the pending barrier if that aligned it."""
        self.ended.add(channel)
        return self.aligner.on_end_of_input(channel)

    @property
    def all_ended(self) -> bool:
        return len(self.ended) == len(self.input_of)

    # -- checkpoints ------------------------------------------------------------------------
    def snapshot(self, checkpoint_id: int) -> Any:
        """Step 4: the task's part of checkpoint ``checkpoint_id`` — a source's position, a copy of
        the operator's state, or None for a sink, whose output so far is pre-committed."""
        if self.reader is not None:
            self.reader.checkpointed(checkpoint_id)  # its offsets, for Source.checkpoint_complete
            return self.reader.position()
        if self.kind.commits_output:
            self._pre_commits.append((checkpoint_id, self.call(self.operator.sink.pre_commit, checkpoint_id)))
            return None
        return self.call(self.operator.snapshot)

    @property
    def uncommitted(self) -> list:
        """A sink's pre-committed handles not yet committed."""
        return [handle for _, handle in self._pre_commits]

    def commit(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` is complete: a sink publishes what it pre-committed up to
        it. A pre-commit of a later checkpoint stays: in a parallel worker the sink may already
        have passed barrier n + 1 when n completes, and that handle still has to reach the
        coordinator with the worker's acknowledgement of n + 1."""
        done = [handle for n, handle in self._pre_commits if n <= checkpoint_id]
        for handle in done:
            self.call(self.operator.sink.commit, checkpoint_id, handle)
        self._pre_commits = [(n, handle) for n, handle in self._pre_commits if n > checkpoint_id]

    def finish(self) -> None:
        """Every input ended: the operator emits what it still holds."""
        self.finished = True
        if self.operator is not None and not self.kind.commits_output:
            self.emit(self.call(self.operator.finish), 0)

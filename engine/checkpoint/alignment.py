"""Barrier alignment: when a task with several input channels takes its snapshot.

A small state machine of its own, used by the task around an operator; it
sees only channel numbers and barriers, never records. Two states:

- **waiting**: no checkpoint is being aligned; every channel flows.
- **aligning(n)**: barrier ``n`` arrived on some channels. Those channels are
  *blocked*: the task buffers what they deliver (it belongs after the
  snapshot) and keeps processing the channels that have not delivered ``n``
  yet (their records belong before it).

The protocol, for a task reading its channels in any interleaving:

1. A record from a channel that ``is_blocked`` is buffered, in order; any
   other record is processed.
2. ``Barrier(n)`` from channel c → ``on_barrier(c, barrier)``. If every channel
   has now delivered ``n`` (a finished channel counts as delivered), it
   returns the barrier: the task snapshots its operator, forwards the
   barrier downstream and then drains the buffers of the channels that are
   no longer blocked — in order, through steps 1–3 again, since a buffer
   may itself hold the next barrier. Otherwise it returns None and c is
   blocked.
3. ``EndOfInput`` from channel c → ``on_end_of_input(c)``: c counts as aligned
   for this and every later checkpoint, so it may complete an alignment
   (then do as in step 2).

So the snapshot of ``n`` follows every record that preceded ``Barrier(n)`` on
every channel and precedes every record that followed it.

Barrier ids increase on every channel; one going backwards on a channel is a
bug upstream and raises ``BarrierOrderError``. Overlapping checkpoints: while
``n`` is aligning, ``Barrier(m)`` with ``m > n`` on a channel that has not
delivered ``n`` means that channel skipped ``n`` (an upstream task declined
it), so ``n`` can never complete here. As in Flink, the older checkpoint is
aborted: the aligner starts aligning ``m`` (only that channel blocked) and
raises ``CheckpointAbort`` for ``n``; the task then drains the buffers of the
channels it released. A barrier that arrives later for an aborted checkpoint
is ignored (None, the channel is not blocked). ``abort(n)`` does the same when
the coordinator gives up on ``n``.

In weir an upstream task skips ``n`` only after the coordinator aborted it (it
did not complete within 'execution.checkpointing.timeout'): every worker gets
``abort(n)`` and calls ``abort`` on each task's aligner, and a worker whose
channel brings ``m`` before that message meets ``CheckpointAbort``
(``subtask.SubtaskExecutor._handle``). Either way nothing is reported back.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from weir.engine.errors import EngineError
from weir.engine.messages import Barrier


class BarrierOrderError(EngineError):
    """Barriers or end-of-input arrived in an order the protocol rules out (a bug upstream)."""


class CheckpointAbort(EngineError):
    """Checkpoint ``checkpoint_id`` cannot complete at this task; the task reports it declined.

    When raised by ``on_barrier``, the aligner has already moved on to aligning
    ``superseded_by``.
    """

    def __init__(self, message: str, *, checkpoint_id: int, superseded_by: int | None = None):
        super().__init__(message, hint="the checkpoint is declined; a later one will be taken")
        self.checkpoint_id = checkpoint_id
        self.superseded_by = superseded_by


@dataclass
class _Aligning:
    barrier: Barrier
    #: Channels that delivered the barrier: blocked until the alignment completes.
    arrived: set[int] = field(default_factory=set)


class BarrierAligner:
    def __init__(self, channels: int):
        if channels < 1:
            raise ValueError(f"a task has at least one input channel, not {channels}")
        self.channels = channels
        self._aligning: _Aligning | None = None
        self._finished: set[int] = set()
        #: The last barrier id each channel delivered (None: none yet).
        self._last_id: list[int | None] = [None] * channels
        #: The largest checkpoint id seen here; a barrier at or below it that is not the
        #: pending one belongs to an aborted checkpoint.
        self._highest_id: int | None = None
        #: Checkpoints aborted before their first barrier arrived here.
        self._aborted_ahead: set[int] = set()

    # -- what the task asks ----------------------------------------------------
    @property
    def pending(self) -> Barrier | None:
        """The barrier being aligned, or None while waiting."""
        return self._aligning.barrier if self._aligning else None

    def is_blocked(self, channel: int) -> bool:
        """True while ``channel`` delivered the pending barrier: buffer its input."""
        self._check_channel(channel)
        return self._aligning is not None and channel in self._aligning.arrived

    def is_finished(self, channel: int) -> bool:
        self._check_channel(channel)
        return channel in self._finished

    # -- what the channels deliver ------------------------------------------------
    def on_barrier(self, channel: int, barrier: Barrier) -> Barrier | None:
        """``channel`` delivered ``barrier``; returns it when every channel has (snapshot now)."""
        self._check_live(channel, "a barrier")
        n = barrier.checkpoint_id
        last = self._last_id[channel]
        if last is not None and n <= last:
            raise BarrierOrderError(
                f"channel {channel} delivered barrier {n} after barrier {last}: "
                "barrier ids must increase on every channel"
            )
        self._last_id[channel] = n
        aligning = self._aligning
        if aligning is not None and n == aligning.barrier.checkpoint_id:
            if barrier.is_savepoint != aligning.barrier.is_savepoint:
                raise BarrierOrderError(
                    f"barrier {n} arrived both as a savepoint and as a checkpoint"
                )
            aligning.arrived.add(channel)
            return self._complete_if_aligned()
        aborted = (self._highest_id is not None and n <= self._highest_id) or n in self._aborted_ahead
        self._aborted_ahead.discard(n)
        if self._highest_id is None or n > self._highest_id:
            self._highest_id = n
        if aligning is not None and n > aligning.barrier.checkpoint_id:
            # The channel skipped the pending barrier: that checkpoint cannot complete here.
            self._aligning = None if aborted else _Aligning(barrier, {channel})
            old = aligning.barrier.checkpoint_id
            raise CheckpointAbort(
                f"checkpoint {old} aborted: channel {channel} delivered barrier {n} "
                f"before barrier {old}",
                checkpoint_id=old,
                superseded_by=None if aborted else n,
            )
        if aborted:
            return None  # a checkpoint that was aborted here: nothing to align
        self._aligning = _Aligning(barrier, {channel})
        return self._complete_if_aligned()

    def on_end_of_input(self, channel: int) -> Barrier | None:
        """``channel`` ended; returns the pending barrier if that completes its alignment."""
        self._check_live(channel, "end of input")
        self._finished.add(channel)
        return self._complete_if_aligned()

    def abort(self, checkpoint_id: int) -> bool:
        """Give up checkpoint ``checkpoint_id`` (the coordinator aborted it): release the
        blocked channels if it was aligning, and ignore its later barriers. True if it was."""
        if self._aligning is not None and self._aligning.barrier.checkpoint_id == checkpoint_id:
            self._aligning = None
            return True
        if self._highest_id is None or checkpoint_id > self._highest_id:
            self._aborted_ahead.add(checkpoint_id)
        return False

    # -- helpers ---------------------------------------------------------------------
    def _complete_if_aligned(self) -> Barrier | None:
        aligning = self._aligning
        if aligning is None or len(aligning.arrived | self._finished) < self.channels:
            return None
        self._aligning = None
        return aligning.barrier

    def _check_channel(self, channel: int) -> None:
        if not 0 <= channel < self.channels:
            raise ValueError(f"channel {channel} does not exist (the task has {self.channels})")

    def _check_live(self, channel: int, what: str) -> None:
        self._check_channel(channel)
        if channel in self._finished:
            raise BarrierOrderError(f"channel {channel} delivered {what} after its end of input")
        if self.is_blocked(channel):
            raise BarrierOrderError(
                f"channel {channel} delivered {what} while blocked for barrier "
                f"{self._aligning.barrier.checkpoint_id}",
                hint="buffer the input of a blocked channel until the alignment completes",
            )

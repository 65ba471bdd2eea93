"""Barrier alignment: the snapshot cuts every channel exactly at its barrier."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.checkpoint.alignment import BarrierAligner, BarrierOrderError, CheckpointAbort
from weir.engine.messages import Barrier, EndOfInput


@dataclass(frozen=True)
class Record:
    channel: int
    name: str
    #: The id of the last barrier before this record on its channel (0: none).
    epoch: int = 0


class Task:
    """The task around an aligner, as the protocol in alignment.py says: records of a
    blocked channel are buffered, and drained once the channel is released."""

    def __init__(self, channels: int):
        self.aligner = BarrierAligner(channels)
        self.buffers = [deque() for _ in range(channels)]
        #: What the operator saw, in order: records and ("snapshot", id).
        self.log: list = []
        self.aborted: list[int] = []

    def deliver(self, channel: int, message) -> None:
        if self.buffers[channel] or self.aligner.is_blocked(channel):
            self.buffers[channel].append(message)
            return
        self._handle(channel, message)
        self._drain()

    def _handle(self, channel: int, message) -> None:
        try:
            if isinstance(message, Barrier):
                done = self.aligner.on_barrier(channel, message)
            elif isinstance(message, EndOfInput):
                done = self.aligner.on_end_of_input(channel)
            else:
                self.log.append(message)
                return
        except CheckpointAbort as abort:
            self.aborted.append(abort.checkpoint_id)
            return
        if done is not None:
            self.log.append(("snapshot", done.checkpoint_id))

    def _drain(self) -> None:
        progress = True
        while progress:
            progress = False
            for channel, buffer in enumerate(self.buffers):
                while buffer and not self.aligner.is_blocked(channel):
                    self._handle(channel, buffer.popleft())
                    progress = True

    def records(self) -> list[str]:
        return [m.name for m in self.log if isinstance(m, Record)]

    def snapshots(self) -> list[int]:
        return [m[1] for m in self.log if isinstance(m, tuple)]

    def before_snapshot(self, checkpoint_id: int) -> list[str]:
        at = self.log.index(("snapshot", checkpoint_id))
        return [m.name for m in self.log[:at] if isinstance(m, Record)]


B1, B2, B3 = Barrier(1), Barrier(2), Barrier(3)


# -- alignment -------------------------------------------------------------------

def test_records_of_the_earlier_epoch_come_before_the_snapshot_and_blocked_ones_after():
    task = Task(2)
    task.deliver(0, Record(0, "a1"))
    task.deliver(0, B1)
    assert task.aligner.is_blocked(0) and not task.aligner.is_blocked(1)
    task.deliver(0, Record(0, "a2", 1))  # after barrier 1 on channel 0: held back
    task.deliver(1, Record(1, "b1"))  # channel 1 is still in the earlier epoch: processed
    assert task.records() == ["a1", "b1"] and list(task.buffers[0]) == [Record(0, "a2", 1)]
    task.deliver(1, B1)
    assert task.log == [Record(0, "a1"), Record(1, "b1"), ("snapshot", 1), Record(0, "a2", 1)]
    assert not task.aligner.is_blocked(0) and task.aligner.pending is None


def test_the_aligner_returns_the_barrier_only_when_every_channel_delivered_it():
    aligner = BarrierAligner(3)
    assert aligner.on_barrier(2, B1) is None
    assert aligner.on_barrier(0, B1) is None
    assert [aligner.is_blocked(c) for c in range(3)] == [True, False, True]
    assert aligner.pending == B1
    assert aligner.on_barrier(1, B1) == B1
    assert [aligner.is_blocked(c) for c in range(3)] == [False, False, False]
    assert aligner.on_barrier(1, B2) is None and aligner.pending == B2


def test_three_channels_with_the_next_barrier_waiting_in_a_buffer():
    task = Task(3)
    for message in (Record(0, "a1"), B1, Record(0, "a2", 1), B2, Record(0, "a3", 2)):
        task.deliver(0, message)
    task.deliver(1, Record(1, "b1"))
    task.deliver(1, B1)
    task.deliver(2, Record(2, "c1"))
    task.deliver(2, B1)  # completes 1; draining channel 0 meets barrier 2 and blocks it again
    assert task.snapshots() == [1]
    assert task.records() == ["a1", "b1", "c1", "a2"]
    assert task.aligner.is_blocked(0) and list(task.buffers[0]) == [Record(0, "a3", 2)]
    task.deliver(1, Record(1, "b2", 1))
    task.deliver(2, B2)
    task.deliver(1, B2)
    assert task.snapshots() == [1, 2]
    assert task.before_snapshot(2) == ["a1", "b1", "c1", "a2", "b2"]
    assert task.records()[-1] == "a3"


def test_end_of_input_mid_alignment_completes_it():
    task = Task(3)
    task.deliver(0, B1)
    task.deliver(1, B1)
    task.deliver(2, Record(2, "c1"))
    assert task.snapshots() == []
    task.deliver(2, EndOfInput())
    assert task.log == [Record(2, "c1"), ("snapshot", 1)]
    # a finished channel counts as aligned for every later barrier too
    task.deliver(0, B2)
    task.deliver(1, B2)
    assert task.snapshots() == [1, 2]


def test_a_barrier_on_the_only_live_channel_completes_at_once():
    aligner = BarrierAligner(2)
    assert aligner.on_end_of_input(1) is None
    assert aligner.on_barrier(0, B1) == B1 and not aligner.is_blocked(0)
    assert BarrierAligner(1).on_barrier(0, B3) == B3


def test_the_savepoint_flag_comes_back_with_the_barrier():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, Barrier(4, is_savepoint=True))
    assert aligner.on_barrier(1, Barrier(4, is_savepoint=True)) == Barrier(4, True)
    aligner.on_barrier(0, Barrier(5, is_savepoint=True))
    with pytest.raises(BarrierOrderError, match="both as a savepoint and as a checkpoint"):
        aligner.on_barrier(1, Barrier(5))


# -- order violations ----------------------------------------------------------------

def test_barrier_ids_going_backwards_on_a_channel_raise():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, B2)
    aligner.on_barrier(1, B2)
    with pytest.raises(BarrierOrderError, match="channel 0 delivered barrier 1 after barrier 2"):
        aligner.on_barrier(0, B1)
    with pytest.raises(BarrierOrderError, match="delivered barrier 2 after barrier 2"):
        aligner.on_barrier(1, B2)


def test_a_blocked_or_finished_channel_cannot_deliver():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, B1)
    with pytest.raises(BarrierOrderError, match="while blocked for barrier 1") as info:
        aligner.on_barrier(0, B2)
    assert "buffer the input" in info.value.hint
    with pytest.raises(BarrierOrderError, match="while blocked"):
        aligner.on_end_of_input(0)
    aligner.on_end_of_input(1)
    with pytest.raises(BarrierOrderError, match="after its end of input"):
        aligner.on_barrier(1, B2)
    with pytest.raises(ValueError, match="channel 2 does not exist"):
        aligner.is_blocked(2)
    with pytest.raises(ValueError):
        BarrierAligner(0)


# -- overlapping and aborted checkpoints ------------------------------------------------

def test_a_newer_barrier_before_the_pending_one_completes_aborts_the_older():
    task = Task(3)
    task.deliver(0, B1)
    task.deliver(0, Record(0, "a2", 1))
    task.deliver(1, B2)  # channel 1 skipped barrier 1: checkpoint 1 cannot complete
    assert task.aborted == [1]
    assert task.aligner.pending == B2
    assert not task.aligner.is_blocked(0) and task.aligner.is_blocked(1)
    assert task.records() == ["a2"]  # channel 0 was released
    task.deliver(2, B1)  # the aborted checkpoint's straggler: ignored, channel 2 flows on
    task.deliver(2, Record(2, "c2", 1))
    assert not task.aligner.is_blocked(2) and task.records() == ["a2", "c2"]
    task.deliver(0, B2)
    task.deliver(2, B2)
    assert task.snapshots() == [2] and task.aborted == [1]


def test_the_abort_exception_says_what_replaced_the_checkpoint():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, B1)
    with pytest.raises(CheckpointAbort, match="checkpoint 1 aborted: channel 1 delivered barrier 3") as info:
        aligner.on_barrier(1, B3)
    assert (info.value.checkpoint_id, info.value.superseded_by) == (1, 3)


def test_abort_from_the_coordinator_releases_the_channels_and_ignores_later_barriers():
    aligner = BarrierAligner(2)
    aligner.on_barrier(0, B1)
    assert aligner.abort(1) is True
    assert not aligner.is_blocked(0) and aligner.pending is None
    assert aligner.on_barrier(1, B1) is None and not aligner.is_blocked(1)
    # a checkpoint aborted before its first barrier got here
    assert aligner.abort(2) is False
    assert aligner.on_barrier(0, B2) is None and aligner.on_barrier(1, B2) is None
    assert aligner.pending is None
    aligner.on_barrier(0, B3)
    assert aligner.on_barrier(1, B3) == B3


# -- the property: every snapshot is a clean cut --------------------------------------

def _channel_streams(draw, channels: int, ids_for) -> list[list]:
    streams = []
    for c in range(channels):
        messages, epoch = [], 0
        for n in ids_for(c):
            for r in range(draw(st.integers(0, 3))):
                messages.append(Record(c, f"{c}:{epoch}:{r}", epoch))
            messages.append(Barrier(n))
            epoch = n
        for r in range(draw(st.integers(0, 3))):
            messages.append(Record(c, f"{c}:{epoch}:{r}", epoch))
        streams.append(messages)
    return streams


def _deliver_interleaved(data, task: Task, streams: list[list]) -> None:
    queues = [deque(s) for s in streams]
    while any(queues):
        channel = data.draw(st.sampled_from([c for c, q in enumerate(queues) if q]))
        task.deliver(channel, queues[channel].popleft())


def _assert_clean_cuts(task: Task, streams: list[list]) -> None:
    for n in task.snapshots():
        at = task.log.index(("snapshot", n))
        for i, message in enumerate(task.log):
            if isinstance(message, Record):
                assert (i < at) == (message.epoch < n), (n, message, task.log)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_snapshot_follows_all_pre_barrier_records_and_precedes_all_later_ones(data):
    channels = data.draw(st.integers(1, 4))
    checkpoints = data.draw(st.integers(0, 4))
    # a channel that ends may end early, before some barriers; the others deliver all
    ends = [data.draw(st.booleans()) for _ in range(channels)]
    last = [data.draw(st.integers(0, checkpoints)) if ends[c] else checkpoints for c in range(channels)]
    streams = _channel_streams(data.draw, channels, lambda c: range(1, last[c] + 1))
    for c in range(channels):
        if ends[c]:
            streams[c].append(EndOfInput())
    task = Task(channels)
    _deliver_interleaved(data, task, streams)
    _assert_clean_cuts(task, streams)
    assert task.aborted == []
    expected = checkpoints if not all(ends) else max(last, default=0)
    assert task.snapshots() == list(range(1, expected + 1))
    # nothing is left behind: every record reached the operator, in channel order
    for c, stream in enumerate(streams):
        sent = [m.name for m in stream if isinstance(m, Record)]
        assert [m.name for m in task.log if isinstance(m, Record) and m.channel == c] == sent


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_skipped_barriers_abort_their_checkpoint_and_the_rest_still_cut_cleanly(data):
    channels = data.draw(st.integers(2, 4))
    ids = range(1, data.draw(st.integers(1, 5)) + 1)
    delivered = [sorted(data.draw(st.sets(st.sampled_from(list(ids))))) for _ in range(channels)]
    streams = _channel_streams(data.draw, channels, lambda c: delivered[c])
    for stream in streams:
        stream.append(EndOfInput())
    task = Task(channels)
    _deliver_interleaved(data, task, streams)
    _assert_clean_cuts(task, streams)
    snapshots = task.snapshots()
    assert snapshots == sorted(set(snapshots))
    # a checkpoint completes exactly when no channel skipped it (delivered it, or ended before)
    agreed = [n for n in ids if any(n in d for d in delivered)
              and all(n in d or max(d, default=0) < n for d in delivered)]
    assert snapshots == agreed
    assert not set(task.aborted) & set(snapshots)
    assert all(not task.aligner.is_blocked(c) for c in range(channels))
    assert task.records() == [m.name for m in task.log if isinstance(m, Record)]
    assert len(task.records()) == sum(isinstance(m, Record) for s in streams for m in s)

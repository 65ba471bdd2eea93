"""Channels between the workers of a parallel job: where rows go, and how they travel.

An edge into subtask j of an operator is one *channel* per upstream subtask:
forward edges stay in the worker (one channel), exchange edges — ``hash`` and
``broadcast`` edges, and every edge into a keyed operator — have one channel
from each of the N upstream subtasks. At a hash edge the upstream subtask
splits each batch by key group (the stable hash of ``engine/state/key_groups``)
into N parts; its own part goes straight into the local operator, the others
go to the workers owning them.

Between two workers every channel is multiplexed on one pipe, in order: a
message is a fixed header (kind, consumer, input, value) followed, for data,
by the batch as Arrow IPC stream bytes. A worker never blocks on a send: each
peer has an ``Outbox`` whose thread writes to the pipe, while the worker's own
loop keeps draining its incoming pipes — so two workers sending to each other
cannot deadlock. A worker reads new source batches only while its outboxes are
short (``Outbox.pending_bytes``), which bounds memory when one worker receives
everything (all keys in its key groups).
"""
from __future__ import annotations

import queue
import struct
import threading
from multiprocessing.connection import Connection

import pyarrow as pa

from engine.graph import Edge, OperatorNode

#: Operators whose state is keyed: every edge into them is an exchange by the edge's keys.
KEYED_KINDS = frozenset({"window_aggregate", "window_join", "window_rank", "session_window"})
#: The routing of an edge whose rows go to every subtask.
BROADCAST = "broadcast"

DATA, WATERMARK, BARRIER, SAVEPOINT_BARRIER, END = range(5)
#: kind, consumer operator (its index in the graph), input index, watermark or checkpoint id.
_HEADER = struct.Struct("<BHBq")


def routing(consumer: OperatorNode, edge: Edge) -> tuple[str, ...] | str | None:
    """How rows cross ``edge`` into ``consumer``: None (forward: they stay in the worker),
    ``BROADCAST``, or the key columns of a hash exchange (``()``: every row to one subtask)."""
    if edge.partitioning == "broadcast":
        return BROADCAST
    if edge.partitioning == "hash":
        return tuple(edge.keys)
    return () if consumer.kind in KEYED_KINDS else None


def encode(kind: int, consumer: int, input_index: int, value: int = 0,
           batch: pa.RecordBatch | None = None) -> pa.Buffer | bytes:
    header = _HEADER.pack(kind, consumer, input_index, value)
    if batch is None:
        return header
    sink = pa.BufferOutputStream()
    sink.write(header)
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue()


def decode(message: bytes) -> tuple[int, int, int, int, pa.RecordBatch | None]:
    """(kind, consumer, input index, value, batch or None) of one message."""
    kind, consumer, input_index, value = _HEADER.unpack_from(message)
    batch = None
    if kind == DATA:
        reader = pa.ipc.open_stream(pa.py_buffer(message).slice(_HEADER.size))
        batch = reader.read_next_batch()
    return kind, consumer, input_index, value, batch


class Outbox:
    """Messages to one peer worker, written to its pipe by a thread of their own."""

    def __init__(self, conn: Connection, name: str):
        self.conn = conn
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._queued = 0  # bytes put (main thread only)
        self._sent = 0  # bytes written (sender thread only)
        self.broken = False
        self._thread = threading.Thread(target=self._send_all, name=name, daemon=True)
        self._thread.start()

    @property
    def pending_bytes(self) -> int:
        return self._queued - self._sent

    def put(self, message: pa.Buffer | bytes) -> None:
        size = len(message) if isinstance(message, bytes) else message.size
        self._queued += size
        self._queue.put((message, size))

    def close(self) -> None:
        """Send what is queued, then close the pipe (the peer sees its end)."""
        self._queue.put(None)
        self._thread.join()
        self.conn.close()

    def _send_all(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            message, size = item
            if not self.broken:
                try:
                    self.conn.send_bytes(message)
                except (BrokenPipeError, OSError):
                    self.broken = True  # the peer is gone: the coordinator fails or stops the job
            self._sent += size

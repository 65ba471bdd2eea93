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
by the batch's Arrow IPC body; a channel's schema travels once before its
first batch (``Encoder``, ``Decoder``). A worker never blocks on a send: each
peer has an ``Outbox`` whose thread writes to the pipe, while the worker's own
loop keeps draining its incoming pipes — so two workers sending to each other
cannot deadlock. A worker reads new source batches only while its outboxes are
short (``Outbox.pending_bytes``), which bounds memory when one worker receives
everything (all keys in its key groups), and a send past the bound waits while
the worker keeps reading its peers (``SubtaskExecutor._backpressure``).
"""
from __future__ import annotations

import functools
import os
import queue
import re
import struct
import threading
from multiprocessing.connection import Connection

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.graph import Edge, OperatorNode
from weir.engine.operators.duckdb_sql import quote_ident
from weir.engine.operators.registry import operator_class
from weir.engine.pandas_import import scalar
from weir.engine.state.key_groups import KEY_GROUP_COLUMN, key_groups, subtask_for_key_group
from weir.engine.watermarks import ARRIVAL_WATERMARK, has_arrival

#: The routing of an edge whose rows go to every subtask.
BROADCAST = "broadcast"

DATA, WATERMARK, BARRIER, SAVEPOINT_BARRIER, END, SCHEMA = range(6)
#: kind, consumer operator (its index in the graph), input index, watermark or checkpoint id.
HEADER = struct.Struct("<BHBq")
#: ``multiprocessing.Connection``'s framing of a message: its length, or -1 and a long length.
_LENGTH, _LONG_LENGTH = struct.Struct("!i"), struct.Struct("!Q")
#: Bytes a pipe between two workers holds (Linux's default is 64 KiB: a batch would need many round trips).
PIPE_BYTES = 1 << 20


def routing(consumer: OperatorNode, edge: Edge) -> tuple[str, ...] | str | None:
    """How rows cross ``edge`` into ``consumer``: None (forward: they stay in the worker),
    ``BROADCAST``, or the key columns of a hash exchange (``()``: every row to one subtask).
    Every edge into a keyed operator (``OperatorKind.keyed_by``) is an exchange."""
    if edge.partitioning == "broadcast":
        return BROADCAST
    if edge.partitioning == "hash":
        return tuple(edge.keys)
    return () if operator_class(consumer.kind).keyed() else None


_IDENTIFIER = re.compile(r'"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_$]*)')
#: Quoted identifiers and string literals, whose ``*`` is neither a star nor a product.
_QUOTED = re.compile(r'"(?:[^"]|"")*"|\'(?:[^\']|\'\')*\'')
#: A ``*`` with no operand before it (the start, ``(``, ``,``, ``.``, SELECT, DISTINCT or ALL): a star.
_STAR = re.compile(r'(?:^|[(,.]|\b(?:SELECT|DISTINCT|ALL)\b)\s*\*', re.IGNORECASE)


def needed_columns(consumer: OperatorNode, schema: pa.Schema) -> list[str] | None:
    """The input columns ``consumer`` reads (``OperatorKind.input_expressions``: a window
    aggregate's keys, aggregate arguments and filters, time column), so that only they cross
    the exchange; None to send every column.

    Conservative: a column stays if its name appears as an identifier in any of those
    expressions; an expression with a star (``*``, ``t.*``, ``COUNT(*)``) keeps them all. A
    multiplication is no star: Nexmark q1's ``0.908 * "price"`` made its source generate
    every column."""
    texts = operator_class(consumer.kind).input_expressions(consumer.config)
    if texts is None or any(_STAR.search(_QUOTED.sub(" q ", text)) for text in texts):
        return None
    names = set()
    for text in texts:
        for quoted, bare in _IDENTIFIER.findall(text):
            names.add(quoted.replace('""', '"') if quoted else bare.lower())
    keep = [n for n in schema.names if n in names or n.lower() in names]
    return keep if len(keep) < len(schema.names) else None


def select_columns(batch: pa.RecordBatch, columns: list[str]) -> pa.RecordBatch:
    """``batch``'s ``columns`` (``needed_columns``), with the rows' arrival watermarks
    (``engine.watermarks.ARRIVAL_WATERMARK``) where it has them: they cross with the rows."""
    return batch.select(columns + [ARRIVAL_WATERMARK] if has_arrival(batch) else columns)


def carries_key_groups(consumer: OperatorNode, keys: tuple[str, ...]) -> bool:
    """True where ``consumer`` takes key groups from the exchange (``OperatorKind.takes_key_groups``:
    a window aggregate) and is keyed by exactly the exchange's key columns: its keys' SQL
    (``OperatorKind.key_expressions``) is those columns, quoted as the planner writes a key it
    computed before the exchange. The key groups the exchange computes are then the operator's,
    and travel with the rows (column ``KEY_GROUP_COLUMN``) instead of being hashed a second time."""
    kind = operator_class(consumer.kind)
    if not kind.takes_key_groups or not keys:
        return False
    return kind.key_expressions(consumer.config) == [quote_ident(key) for key in keys]


#: Flink's setting for local-global aggregation, and its values.
AGG_PHASE_STRATEGY = "table.optimizer.agg-phase-strategy"
AGG_PHASES = ("AUTO", "TWO_PHASE", "ONE_PHASE")


def two_phase(settings: dict) -> bool:
    """Whether window aggregates are pre-aggregated before a parallel exchange (Flink's
    local-global aggregation; ``WindowAggregate.pre_aggregate``): yes for ``AUTO`` (the default) and ``TWO_PHASE``, no for ``ONE_PHASE``."""
    value = str(settings.get(AGG_PHASE_STRATEGY) or "AUTO").strip().upper()
    if value not in AGG_PHASES:
        raise EngineError(f"'{AGG_PHASE_STRATEGY}' is {value!r}",
                          hint=f"use one of {', '.join(repr(v) for v in AGG_PHASES)}")
    return value != "ONE_PHASE"


def pre_aggregated(consumer: OperatorNode, edge: Edge, settings: dict) -> bool:
    """Whether rows cross ``edge`` into ``consumer`` as partial aggregates (two phases: the
    local one in each upstream subtask, ``pre_aggregate``, the global one in ``consumer``):
    at a hash exchange whose key groups are the consumer's (``carries_key_groups``), into an
    operator that pre-aggregates (``OperatorKind.pre_aggregates``) with a config whose
    aggregates all merge (``combines``: no DISTINCT, no late-rows table), unless
    'table.optimizer.agg-phase-strategy' is ``ONE_PHASE``. The runtime and EXPLAIN ask this."""
    keys = routing(consumer, edge)
    kind = operator_class(consumer.kind)
    return (keys not in (None, BROADCAST) and edge.port == 0 and kind.pre_aggregates
            and carries_key_groups(consumer, keys) and two_phase(settings) and kind.combines(consumer.config))


def split(batch: pa.RecordBatch, keys: tuple[str, ...], parallelism: int, max_parallelism: int,
          with_key_groups: bool = False) -> list[pa.RecordBatch]:
    """``batch`` cut by key group into one part per subtask (rows in order), like
    ``key_groups.partition``; with ``with_key_groups`` each part carries its rows' groups."""
    groups = key_groups(batch, list(keys), max_parallelism)
    if with_key_groups:
        batch = batch.append_column(KEY_GROUP_COLUMN, groups)
    return split_by_key_group(batch, groups, parallelism, max_parallelism)


def split_by_key_group(batch: pa.RecordBatch, groups: pa.Array, parallelism: int,
                       max_parallelism: int) -> list[pa.RecordBatch]:
    """``batch`` cut into one part per subtask by its rows' key ``groups`` (rows in order)."""
    targets = pc.take(_owners(parallelism, max_parallelism), groups)
    if parallelism <= 8:
        return [batch.filter(pc.equal(targets, scalar(j))) for j in range(parallelism)]
    order = pc.sort_indices(targets)
    ordered, sorted_targets = batch.take(order), targets.take(order)
    bounds = [pc.index(sorted_targets, j).as_py() for j in range(parallelism)]
    out = []
    for j in range(parallelism):
        start = next((b for b in bounds[j:] if b >= 0), batch.num_rows)
        end = next((b for b in bounds[j + 1:] if b >= 0), batch.num_rows)
        out.append(ordered.slice(start, end - start if bounds[j] >= 0 else 0))
    return out


@functools.lru_cache(maxsize=None)
def _owners(parallelism: int, max_parallelism: int) -> pa.Array:
    """Key group -> the subtask owning it."""
    return pa.array([subtask_for_key_group(g, parallelism, max_parallelism) for g in range(max_parallelism)],
                    pa.int32())


def widen(conn: Connection) -> None:
    """Let the pipe behind ``conn`` hold PIPE_BYTES, where the system allows it."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError):
        pass  # not Linux, or above /proc/sys/fs/pipe-max-size: the default works, more slowly


class Encoder:
    """Messages to one peer. A channel's schema goes once (and again if it changes); a
    batch is then its IPC record-batch body alone, serialised in one allocation."""

    def __init__(self) -> None:
        self._schemas: dict[tuple[int, int], pa.Schema] = {}

    def control(self, kind: int, consumer: int, input_index: int, value: int) -> list:
        return [HEADER.pack(kind, consumer, input_index, value)]

    def data(self, consumer: int, input_index: int, batch: pa.RecordBatch) -> list:
        out = []
        if self._schemas.get((consumer, input_index)) != batch.schema:
            self._schemas[consumer, input_index] = batch.schema
            out += [HEADER.pack(SCHEMA, consumer, input_index, 0), batch.schema.serialize()]
        return out + [HEADER.pack(DATA, consumer, input_index, 0), batch.serialize()]


class Decoder:
    """Messages from one peer, as ``Encoder`` wrote them and ``Connection.send_bytes`` framed them
    (a 4-byte big-endian length, or -1 and an 8-byte one, then the bytes).

    They are read from the connection's file descriptor itself, a batch's body straight into
    memory from Arrow's pool, which the batch then uses in place: one copy, the kernel's.
    ``Connection.recv_bytes`` made three of every body (chunks read, gathered in a ``BytesIO``,
    copied out of it), each into pages new to the process."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._fd = conn.fileno()
        self._schemas: dict[tuple[int, int], pa.Schema] = {}

    def receive(self) -> tuple[int, int, int, int | pa.RecordBatch]:
        """(kind, consumer, input index, watermark, checkpoint id or batch) of the next message.
        EOFError when the peer closed its end between two messages."""
        while True:
            size, = _LENGTH.unpack(self._read(_LENGTH.size, at_start=True))
            if size != HEADER.size:
                raise OSError(f"exchange: a message header of {size} bytes")
            kind, consumer, input_index, value = HEADER.unpack(self._read(HEADER.size))
            if kind == SCHEMA:
                self._schemas[consumer, input_index] = pa.ipc.read_schema(self._body())
                continue
            if kind == DATA:
                return kind, consumer, input_index, pa.ipc.read_record_batch(self._body(),
                                                                             self._schemas[consumer, input_index])
            return kind, consumer, input_index, value

    def _read(self, size: int, *, at_start: bool = False) -> bytes:
        """The next ``size`` bytes (few: a length or a header)."""
        data = os.read(self._fd, size)
        while len(data) < size:
            more = os.read(self._fd, size - len(data))
            if not more:
                break
            data += more
        if len(data) < size:
            if at_start and not data:
                raise EOFError
            raise OSError("exchange: end of file inside a message")
        return data

    def _body(self) -> pa.Buffer:
        """The next message's bytes, read into one buffer of Arrow's pool (64-byte aligned)."""
        size, = _LENGTH.unpack(self._read(_LENGTH.size))
        if size == -1:
            size, = _LONG_LENGTH.unpack(self._read(_LONG_LENGTH.size))
        buffer = pa.allocate_buffer(size)
        view, got = memoryview(buffer), 0
        while got < size:
            n = os.readv(self._fd, [view[got:]])
            if n == 0:
                raise OSError("exchange: end of file inside a message")
            got += n
        return buffer


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

    def put(self, parts: list) -> None:
        """Queue one message: its parts are written one after another."""
        size = sum(len(p) if isinstance(p, bytes) else p.size for p in parts)
        self._queued += size
        self._queue.put((parts, size))

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
            parts, size = item
            if not self.broken:
                try:
                    for part in parts:
                        self.conn.send_bytes(part)
                except (BrokenPipeError, OSError):
                    self.broken = True  # the peer is gone: the coordinator fails or stops the job
            self._sent += size

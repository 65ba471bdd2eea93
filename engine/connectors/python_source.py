"""The ``python`` connector: Python objects of this process as a source or a sink.

``weir.connect().register(name, data)`` keeps ``data`` here under an id and
declares a table WITH ('connector' = 'python', 'object-id' = id); the source
reads the object back by that id. ``register_sink`` does the same with a
callback. The object lives in this process only, so a job reading or writing
one runs at parallelism 1 (a parallel job's workers are other processes: the
source refuses, naming the setting).

Source, by what was registered:

1. A ``pyarrow.Table`` (a pandas DataFrame is converted to one when it is
   registered): one split; the offset is the number of rows read, so a
   checkpointed job resumes exactly where it was (rewindable) and the source
   is bounded: it ends with a final watermark that fires every window.
2. An iterator of record batches: one split, read once, unbounded in the
   sense that nothing can replay it. The offset is the number of batches
   read; restoring from a checkpoint or restarting (which would need the
   batches read before) fails with an error saying so, rather than dropping
   or repeating rows. The job ends when the iterator does. The job's thread
   calls ``next`` on it: an iterator that blocks holds the job (and a request
   to stop it) until it yields.

Every batch is cast to the declared schema (timestamps to ``timestamp[us]``,
truncated to a declared precision below 6, as every source does).

Sink: the callback gets every batch as it is written (not transactional,
like the print sink: after a restart it may see rows again). A changelog's
batches carry the row kind as the string column ``op`` (+I, -U, +U, -D).
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.changelog import ROW_KIND, SHORT_NAMES
from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Sink, Source
from weir.engine.connectors.timestamps import declared_precision, truncate
from weir.engine.errors import ConnectorOptionError, EngineError

CONNECTOR = "python"
#: The column holding a change's kind in the batches a Python sink or stream receives.
OP = "op"


@dataclass
class _Registered:
    data: pa.Table | Iterator[pa.RecordBatch] | Callable[[pa.RecordBatch], None]
    #: An iterator source has been read from (it cannot be read again).
    started: bool = False


_objects: dict[str, _Registered] = {}
_ids = itertools.count(1)
_lock = threading.Lock()


def register_object(data: Any) -> str:
    """Keep ``data`` (a Table, an iterator of batches, or a sink's callback) for the jobs of
    this process; returns the id a table's 'object-id' option names it by."""
    with _lock:
        object_id = f"py-{next(_ids)}"
        _objects[object_id] = _Registered(data)
    return object_id


def forget_object(object_id: str) -> None:
    _objects.pop(object_id, None)


def rewindable(object_id: str) -> bool:
    """Whether the registered source object can be read again from any offset (a Table)."""
    found = _objects.get(object_id)
    return found is not None and isinstance(found.data, pa.Table)


def _lookup(options: dict[str, str]) -> _Registered:
    object_id = options["object-id"]
    found = _objects.get(object_id)
    if found is None:
        raise ConnectorOptionError(
            f"no Python object '{object_id}' in this process: a 'python' table reads an object registered "
            "with Connection.register in the process that runs the job",
            hint="run jobs over registered Python data at SET 'parallelism.default' = '1' "
                 "(a parallel job's workers are other processes)")
    return found


def with_op(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A batch as Python code receives it: a changelog's int8 row kind becomes the leading
    string column ``op`` ('+I', '-U', '+U', '-D'); an append-only batch gets '+I' throughout."""
    if ROW_KIND in batch.schema.names:
        codes = batch.column(ROW_KIND)
        keys = pa.array(list(SHORT_NAMES), pa.int8())
        names = pa.array(list(SHORT_NAMES.values()), pa.string())
        op = names.take(pc.index_in(codes, value_set=keys))
        batch = batch.drop_columns([ROW_KIND])
    else:
        op = pa.array(["+I"] * batch.num_rows, pa.string())
    return pa.RecordBatch.from_arrays([op, *batch.columns], names=[OP, *batch.schema.names])


class PythonSource(Source):
    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        self.registered = _lookup(options)
        if callable(self.registered.data) and not isinstance(self.registered.data, pa.Table):
            raise ConnectorOptionError(f"Python object '{options['object-id']}' is a sink's callback, not data")

    @property
    def bounded(self) -> bool:
        return isinstance(self.registered.data, pa.Table)

    def splits(self) -> list[str]:
        return ["0"]

    def read(self, split: str, offset: Any = None) -> Iterator[tuple[pa.RecordBatch, Any]]:
        data = self.registered.data
        if isinstance(data, pa.Table):
            start = int(offset or 0)
            for batch in data.slice(start).to_batches(max_chunksize=self.batch_size):
                start += batch.num_rows
                yield self._conform(batch), start
            return
        yield from self._read_iterator(data, offset)

    def _read_iterator(self, data: Iterator[pa.RecordBatch], offset: Any) -> Iterator[tuple[pa.RecordBatch, Any]]:
        object_id = self.options["object-id"]
        if offset or self.registered.started:
            raise EngineError(
                f"the iterator registered as Python object '{object_id}' cannot be read again "
                f"({'restoring batch ' + str(offset) if offset else 'a restart'} needs the batches already read)",
                hint="register a pyarrow.Table (rewindable) for a job that checkpoints or restarts, "
                     "or run it without savepoints and with restart-strategy 'none'")
        self.registered.started = True
        count = 0
        for batch in data:
            if isinstance(batch, pa.Table):
                pieces = batch.to_batches()
            elif isinstance(batch, pa.RecordBatch):
                pieces = [batch]
            else:
                raise EngineError(f"the iterator registered as Python object '{object_id}' yielded a "
                                  f"{type(batch).__name__}, not a pyarrow.RecordBatch")
            for piece in pieces:
                count += 1
                yield self._conform(piece), count

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        missing = [n for n in self.schema.names if n not in batch.schema.names]
        if missing:
            raise EngineError(f"a batch of Python object '{self.options['object-id']}' has no column "
                              f"{', '.join(missing)}", hint="every batch needs the columns the table was registered with")
        columns = []
        for field in self.schema:
            column = batch.column(field.name)
            if column.type != field.type:
                column = column.cast(field.type, safe=not pa.types.is_timestamp(field.type))
            precision = declared_precision(field)
            if precision is not None:
                column = truncate(column, precision)
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


class PythonSink(Sink):
    """Calls the registered callback with every batch (``op`` column first)."""

    transactional = False

    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        registered = _lookup(options)
        if not callable(registered.data) or isinstance(registered.data, pa.Table):
            raise ConnectorOptionError(f"Python object '{options['object-id']}' is data, not a sink's callback")
        self.callback = registered.data

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows:
            self.callback(with_op(batch))


SPEC = ConnectorSpec(
    name=CONNECTOR,
    source=PythonSource,
    sink=PythonSink,
    options={"object-id": OptionSpec("the Python object registered with Connection.register or "
                                     "Connection.register_sink", required=True)},
)

"""A watermark's firing, streamed out of DuckDB in bounded batches.

A watermark can fire any number of windows at once (a bounded input's last one fires them all).
The rows it emits are read from DuckDB as Arrow batches of at most
``duckdb_sql.OUTPUT_BATCH_ROWS`` rows while the driver consumes them, so no more than two batches
of a firing are ever held outside DuckDB's limited, spilling memory. What fired is deleted from
the state (``evict``) once the stream has ended:

1. ``FiringStream.start`` runs the firing's query on a cursor of the state connection (the
   connection itself stays free) and reads two batches. Fewer than two: the firing was small, it
   is evicted at once, and the batches come back as a list.
2. Else it returns an iterator that reads the rest as it is consumed and evicts when it ends.
3. A firing its operator knows to be small (at most ``small_firing_rows()`` rows) is read at once
   instead (``start_small``), its statement planned once, and evicted at once.
4. Every call into the operator ends an open stream first (``StreamsFirings.open``): its unread
   rows are never emitted (as if read and dropped; the drivers read every stream to the end) and
   what fired is evicted, so the state never lags behind the watermark.

``engine.operators.window_aggregate`` streams its firings with the same ``FiringStream``
(``start_stream``: its query runs on its window state's reader, and a large firing is
materialised before it is sorted).
"""
from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator

import duckdb
import pyarrow as pa

from weir.engine.operators.batches import conform
from weir.engine.operators import duckdb_sql
from weir.engine.operators.duckdb_sql import ArrowStream, run_arrow, stream_arrow


def small_firing_rows() -> int:
    """A firing of at most this many rows (as many as a stream holds at most: two batches of
    ``duckdb_sql.OUTPUT_BATCH_ROWS``) may be read from DuckDB at once, its statement planned once
    (``duckdb_sql.run_arrow``), where its operator knows the bound beforehand."""
    return 2 * duckdb_sql.OUTPUT_BATCH_ROWS


class FiringStream:
    """At most one firing being streamed out of one operator's state, and what it evicts."""

    def __init__(self, ctx):
        self.ctx = ctx
        self._cursor: duckdb.DuckDBPyConnection | None = None
        #: The open stream and its eviction (None: no firing being read).
        self._open: tuple[ArrowStream, Callable[[], None]] | None = None

    def start(self, con: duckdb.DuckDBPyConnection, sql: str, evict: Callable[[], None],
              views: dict[str, pa.Table] | None = None, *, small: bool = False) -> Iterable[pa.RecordBatch]:
        """The rows of ``sql`` (a firing, in output order) in the operator's output schema, in
        batches of at most ``OUTPUT_BATCH_ROWS``; ``evict()`` deletes what fired, once they are read.
        ``views`` are Arrow tables ``sql`` reads by name, registered on the cursor while it runs.
        ``small``: the caller knows the firing has at most ``small_firing_rows()`` rows; it is read at
        once (``start_small``)."""
        self.end()  # before the cursor runs another query
        if self._cursor is None:
            self._cursor = con.cursor()
        cursor = self._cursor
        for name, table in (views or {}).items():
            cursor.register(name, table)

        def unregister() -> None:
            for name in views or ():
                cursor.unregister(name)

        def unregister_and_evict() -> None:
            unregister()
            evict()

        if small:
            try:
                table = run_arrow(cursor, sql, self.ctx.operator_id)
            finally:
                unregister()
            return self.start_small(table, evict)
        try:
            stream = stream_arrow(cursor, sql, self.ctx.operator_id)
        except BaseException:
            unregister()
            raise
        return self.start_stream(stream, unregister_and_evict)

    def start_small(self, table: pa.Table, evict: Callable[[], None]) -> list[pa.RecordBatch]:
        """A firing read at once (``duckdb_sql.run_arrow``: at most ``small_firing_rows()``, as
        many as a stream holds at most), evicted at once, in batches of at most ``OUTPUT_BATCH_ROWS``."""
        self.end()
        evict()
        n = duckdb_sql.OUTPUT_BATCH_ROWS
        return [batch.slice(at, n) for batch in self._conform(table.to_batches()) for at in range(0, batch.num_rows, n)]

    def start_stream(self, stream: ArrowStream, evict: Callable[[], None]) -> Iterable[pa.RecordBatch]:
        """``start`` for a firing already running as ``stream`` (on a connection of the caller's)."""
        self.end()
        head = [batch for _, batch in zip(range(2), stream)]
        if len(head) < 2:  # the whole firing has been read
            evict()
            return self._conform(head)
        self._open = opened = (stream, evict)
        return self._rest(head, stream, opened)

    def _rest(self, head: list[pa.RecordBatch], stream: ArrowStream, opened: tuple) -> Iterator[pa.RecordBatch]:
        try:
            for batch in itertools.chain(head, stream):
                if self._open is not opened:  # ended by a later call into the operator
                    return
                yield from self._conform([batch])
        finally:
            if self._open is opened:
                self.end()

    def end(self) -> None:
        """Close the firing being streamed, if any, and evict what it fired."""
        if self._open is None:
            return
        stream, evict = self._open
        self._open = None
        stream.close()
        evict()

    def close(self) -> None:
        """The operator closes: drop an open stream (nothing is evicted: the state goes) and the cursor."""
        if self._open is not None:
            self._open[0].close()
            self._open = None
        if self._cursor is not None:
            self._cursor.close()
            self._cursor = None

    def _conform(self, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        if not batches:
            return []
        table = pa.Table.from_batches(batches)
        self.ctx.count("rows_out", table.num_rows)
        return conform(table, self.ctx.output_schema, self.ctx.operator_id)


class StreamsFirings:
    """Mixed into a ``StateOperator`` (before it) whose watermarks fire rows out of its state
    connection ``con``: ``stream_firing`` streams them (``FiringStream``), ``open`` — which every
    call into the operator makes first — ends a stream still open, ``close`` drops it."""

    _firing: FiringStream | None = None

    def open(self) -> None:
        if self._firing is not None:
            self._firing.end()
        super().open()

    def close(self) -> None:
        if self._firing is not None:
            self._firing.close()
            self._firing = None
        super().close()

    def stream_firing(self, sql: str, evict: Callable[[], None],
                      views: dict[str, pa.Table] | None = None, *, small: bool = False) -> Iterable[pa.RecordBatch]:
        return self._firing_stream().start(self.con, sql, evict, views, small=small)

    def fired_table(self, table: pa.Table, evict: Callable[[], None]) -> list[pa.RecordBatch]:
        """A firing the operator computed itself (not in DuckDB), as a small firing is returned
        (``FiringStream.start_small``)."""
        return self._firing_stream().start_small(table, evict)

    def _firing_stream(self) -> FiringStream:
        if self._firing is None:
            self._firing = FiringStream(self.ctx)
        return self._firing

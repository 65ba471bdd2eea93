"""WindowAggregate: an event-time window aggregate (TUMBLE, HOP, CUMULATE), state in DuckDB.

Config (``WindowAggregateConfig``)::

    window:        SlicedWindowConfig(kind="tumble", time_column="date_time", size=10000000, offset=0)
                   (HOP adds slide, CUMULATE step, both µs dividing the size)
    keys:          ((name, sql), ...)
    aggregates:    (AggregateCall(name, function, argument, distinct, filter), ...)
    having:        sql or None
    projection:    ((name, sql), ...)
    grouping_sets: GroupingSetCopies(column="_e", count=n)   (optional)
    late_rows:     (optional: ``engine.operators.late_rows``)

Sizes and offsets are µs. ``keys``, aggregate arguments and filters are SQL
over the input columns; ``having`` and ``projection`` are SQL over the key
names, ``window_start``, ``window_end``, ``window_time`` and the aggregate
names. The result equals DuckDB's batch query
``SELECT <projection> FROM input GROUP BY keys, window HAVING <having>``
over the rows that were not late.

With ``grouping_sets`` the input holds every row once per grouping set (the
planner's Expand), numbered by ``column``, which is also the last key; the
copies of a row share its time, so they are late together, and only copy 0
is counted.

The operator is three parts: the clock (``EventTimeClock``: the watermark),
the assigner (``windows.py``: row → slice, slice → windows, watermark → what
fired) and the per-slice accumulators kept in ``WindowState``.

Per batch: rows with a NULL time and late rows (every window of their slice
already fired under the watermark the row met: its arrival watermark,
``engine.watermarks``, or the operator's own if that is larger) are counted and
dropped; the rest are held in Arrow until the next watermark (``_hold``), then
aggregated into partials per (key, slice) by one ``GROUP BY`` and appended to the
state — once, however many windows overlap. Per watermark: every window with
``window_end - 1 ms`` between the previous watermark (exclusive) and this one
(inclusive) merges the partials of its slices and is emitted (ordered by
window_end, then keys); slices whose windows have all fired are deleted. Held
rows all of whose windows fire at that watermark are read by the firing with
the state and never appended (a cascaded TUMBLE: three statements a batch -> one).

Plain COUNT, SUM, MIN and MAX of input columns, projected as they are and without HAVING, run no
SQL at all while they can (``window_partials``, ``_add_partials``): each batch's partials are
computed and held in Arrow, and a watermark fires from them; they move into the state (``_flush``)
before a snapshot, past a small firing's rows, or where DuckDB must fire.

Two phases (Flink's local-global aggregation). At a parallel exchange the
upstream subtask calls ``pre_aggregate`` on its own subtask of this operator:
each batch becomes its partials per (key, slice) — the rows the state would
append — and only those cross to the subtask owning the key, which appends
them (``process_batch`` of a batch marked ``PARTIALS``). The state, its
snapshots and the results are the same as with one phase; the exchange carries
a row per key and slice instead of a row per event, and the grouping is done
by every upstream subtask in parallel. Rows late under their arrival watermark
are dropped and counted before they are combined (that verdict depends on the
row alone); where the partials land, a slice already late under the owner's
own watermark is dropped too (a safety net: that watermark is never above the
rows' arrival watermarks).

With ``bad_rows`` ('python.udf.bad-rows.table') a row a Python aggregate function's ``accumulate``
raises on goes to the bad-rows table and the batch is appended without it
(``bad_aggregate_rows``: only a batch that raised pays for finding its rows); the rows are then
aggregated where they arrive, in one phase (``combines``), so that the bad rows are kept whole.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.operators.accumulators import (Accumulator, AggregateCall, DistinctAccumulator, PythonAccumulator,
                                                    accumulator, argument_columns, register_python)
from weir.engine.operators.base import Operator, OperatorContext, explain_lines
from weir.engine.operators.clock import EventTimeClock
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.bad_aggregate_rows import keep_python, python_arguments, raising_rows, without_bad_rows
from weir.engine.operators.late_rows import ROW_NUMBER, BadRows, LateRows, LateRowsConfig
from weir.engine.operators.duckdb_sql import int_literal, query_arrow, quote_ident, run_arrow, stream_arrow
from weir.engine.operators.firings import FiringStream, small_firing_rows
from weir.engine.operators.window_partials import KEY_GROUP, ArrowPartials
from weir.engine.operators.window_state import FROM_END, SLICE, WINDOW_END, WINDOW_START, WindowState
from weir.engine.operators.windows import (WINDOW_TIME_LAG_US, SlicedWindowConfig, align_array, align_numpy, event_times,
                                               window_assigner)
from weir.engine.state.key_groups import KEY_GROUP_COLUMN, key_groups
from weir.engine.state.keyed_tables import merge_snapshots, owned_tables
from weir.engine.messages import MIN_WATERMARK
from weir.engine.pandas_import import arrow_array, numpy_values, scalar
from weir.engine.watermarks import USE, highest_watermark, row_watermarks

INPUT_VIEW = "window_input"
WINDOW_START_NAME, WINDOW_END_NAME = "window_start", "window_end"
#: Schema metadata marking a batch of partial aggregates (``pre_aggregate``).
PARTIALS = {b"weir.window_partials": b"1"}
SNAPSHOT_VERSION = 1
#: Past this many rows of state a firing is computed into ``FIRED_TABLE`` before it is sorted
#: (``_emit_sql``); below it one statement does both, which is cheaper.
MATERIALIZE_FIRING_ROWS = 1_000_000
FIRED_TABLE = "__weir_fired_windows"


def has_from_end(batch: pa.RecordBatch) -> bool:
    return batch.schema.get_field_index(FROM_END) >= 0


def _sorts_as_duckdb(t: pa.DataType) -> bool:
    """Whether Arrow's ascending order of values of type ``t`` (NULLs last) is DuckDB's ORDER BY:
    integers, decimals, booleans, times and dates, strings and bytes (both compare bytes)."""
    return (pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_boolean(t) or pa.types.is_timestamp(t)
            or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_binary(t))


def _referenced_column(sql: str, names: list[str]) -> str | None:
    """The input column ``sql`` names, if it is a bare (or quoted) column reference."""
    for name in names:
        if sql == quote_ident(name) or sql == name:
            return name
    return None


@dataclass(frozen=True)
class GroupingSetCopies(OperatorConfig):
    """GROUPING SETS: every input row comes ``count`` times, numbered in ``column`` (the last key)."""

    column: str
    count: int


@dataclass(frozen=True)
class WindowAggregateConfig(OperatorConfig):
    window: SlicedWindowConfig
    #: (output name, SQL over the keys, the window bounds and the aggregate names).
    projection: tuple[tuple[str, str], ...]
    #: (output name, SQL over the input), per key; none: one group per window.
    keys: tuple[tuple[str, str], ...] = ()
    aggregates: tuple[AggregateCall, ...] = ()
    #: SQL over the keys, the window bounds and the aggregate names, or None.
    having: str | None = None
    grouping_sets: GroupingSetCopies | None = optional()
    late_rows: LateRowsConfig | None = optional()
    #: With 'python.udf.bad-rows.table': a row a Python aggregate function's ``accumulate`` raises
    #: on goes to the bad-rows table, left out of every aggregate (``bad_aggregate_rows``).
    bad_rows: bool = optional(False)


class WindowAggregate(Operator):
    Config = WindowAggregateConfig
    #: State: window geometry (slices), keys and accumulators.
    STATE_CONFIG = ("window", "keys", "aggregates", "grouping_sets")
    arrival_watermark = USE
    keyed_by = ("keys",)
    merges_snapshots = True
    windowed = True
    late_rows_table = True
    drops_late_rows = True
    pre_aggregates = True
    takes_key_groups = True

    @classmethod
    def input_expressions(cls, config: WindowAggregateConfig) -> list[str] | None:
        """Keys, aggregate arguments and filters, and the time column; with a late-rows table, or a
        bad-rows table and a Python aggregate, every column (it keeps the rows as they came)."""
        if config.late_rows or (config.bad_rows and any(a.python is not None for a in config.aggregates)):
            return None
        texts = [sql for _, sql in config.keys]
        texts += [text or "" for a in config.aggregates for text in (a.argument, a.filter)]
        return texts + [config.window.time_column]

    @classmethod
    def explain(cls, config: WindowAggregateConfig) -> list[str]:
        sliced = config.window.kind in ("hop", "cumulate")
        per = ", ".join([*(name for name, _ in config.keys), "slice" if sliced else "window"])
        if sliced:
            state = (f"partial accumulators per ({per}), shared by the overlapping windows; a slice is "
                     "dropped when the watermark passes the end of its last window")
        else:
            state = f"window accumulators per ({per}), dropped when the watermark passes window_end"
        return explain_lines(", ".join(name for name, _ in config.keys) or "- (one global group per window)",
                             state)

    def __init__(self, config: WindowAggregateConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        oid = ctx.operator_id
        if not config.projection:
            raise EngineError("window_aggregate config lacks 'projection'", operator_id=oid)
        self.assigner = window_assigner(config.window, oid)
        self.clock = EventTimeClock()
        self.keys: list[tuple[str, str]] = list(config.keys)
        self.calls = [AggregateCall.from_config(a, oid) for a in config.aggregates]
        self.accumulators: list[Accumulator | PythonAccumulator] = []
        self.distincts: list[DistinctAccumulator] = []
        for i, call in enumerate(self.calls):
            if call.keeps_distinct_values:
                self._distinct_for(call).calls.append(call)
            else:
                self.accumulators.append(accumulator(call, i, oid, [f"__k{j}" for j in range(len(self.keys))]))
        self.having: str | None = config.having
        self.projection: list[tuple[str, str]] = list(config.projection)
        #: The column numbering the copies of a row, one per grouping set (GROUPING SETS).
        self.copy_column: str | None = config.grouping_sets.column if config.grouping_sets else None
        self.late_rows = LateRows(config.late_rows, ctx)
        #: Rows a Python aggregate's accumulate raises on, kept (``bad_rows``; ``bad_aggregate_rows``).
        self._bad_rows = BadRows(ctx) if config.bad_rows and python_arguments(self.accumulators) else None
        keep_python([f for f, _, _ in python_arguments(self.accumulators)])
        self._python = bool(python_arguments(self.accumulators))
        self.state: WindowState | None = None
        #: A lower bound of the earliest slice in the state (None: no state); saves a query per
        #: watermark.
        self._earliest_slice: int | None = None
        #: A large firing being streamed out (``process_watermark``, ``engine.operators.firings``).
        self._firing = FiringStream(ctx)
        #: Whether ``FIRED_TABLE`` holds a large firing being read (dropped with the eviction).
        self._fired_table = False
        #: Whether a small firing is sorted in Arrow (``_small_firing``; None: not known yet).
        self._arrow_sorts: bool | None = None
        #: Prepared batches not yet appended (``_hold``).
        self._held: list[pa.RecordBatch] = []
        #: Partials of plain aggregates held in Arrow, fired without SQL (``window_partials``;
        #: None: the aggregates, HAVING or projection need SQL).
        self._partials: ArrowPartials | None = self._arrow_partials()

    def _arrow_partials(self) -> ArrowPartials | None:
        """An ``ArrowPartials`` where it computes this aggregate: plain aggregates
        (``ArrowPartials.eligible``), one row per input row (no grouping-set copies), no HAVING,
        and a projection of the keys, window bounds and aggregates as they are."""
        if not ArrowPartials.eligible(self.calls) or self.distincts or self.copy_column or self.having:
            return None
        sources = {name: f"__k{i}" for i, (name, _) in enumerate(self.keys)}
        sources.update({WINDOW_START_NAME: WINDOW_START, WINDOW_END_NAME: WINDOW_END, "window_time": "window_time"})
        sources.update({call.name: call.name for call in self.calls})
        if len(sources) != len(self.keys) + 3 + len(self.calls):  # a name that means two things
            return None
        output = []
        for name, sql in self.projection:
            source = _referenced_column(sql, list(sources))
            if source is None:
                return None
            output.append((name, sources[source]))
        return ArrowPartials(self.assigner, len(self.keys), self.accumulators, output, self.ctx.max_parallelism)

    def _distinct_for(self, call: AggregateCall) -> DistinctAccumulator:
        for d in self.distincts:
            if (d.argument, d.filter) == (call.argument, call.filter):
                return d
        d = DistinctAccumulator(call.argument, call.filter, len(self.distincts))
        self.distincts.append(d)
        return d

    # -- lifecycle -----------------------------------------------------------
    def open(self) -> None:
        self._firing.end()
        if self.state is None:
            # One DuckDB thread: each statement groups one batch or fires a few windows, work that
            # a second thread slows (its hash tables merged after), and the source's read-ahead
            # thread has the other core (10M bids, tumble p=1: 4.75 -> 4.13 s whole, hop
            # 7.46 -> 5.95 s, cumulate 10.9 -> 9.2 s, on a loaded 2-core machine).
            con = self.ctx.state_connection(preserve_insertion_order=False, max_threads=1)
            register_python(con, self.accumulators)  # Python aggregate functions (engine.udafs)
            self.state = WindowState(
                con,
                self.ctx.operator_id,
                len(self.keys),
                self.accumulators,
                self.distincts,
                self.ctx.max_parallelism,
            )

    def close(self) -> None:
        self._firing.end()  # what fired leaves the state before it closes
        self._firing.close()
        self._held = []  # (the state goes)
        if self._partials is not None:
            self._partials.clear()
        self.late_rows.close()
        if self._bad_rows is not None:
            self._bad_rows.close()
        if self.state is not None:
            self.state.close()
            self.state = None

    # -- batches -------------------------------------------------------------
    @classmethod
    def combines(cls, config: WindowAggregateConfig) -> bool:
        """Whether the rows may be pre-aggregated before the exchange (``pre_aggregate``): not
        with DISTINCT aggregates (their values must meet in one place) nor a late-rows table or,
        with a Python aggregate, a bad-rows table (which keep the rows themselves)."""
        config = cls.typed(config)  # a graph built by hand may hold the JSON dict
        calls = [AggregateCall.from_config(a, "") for a in config.aggregates]
        keeps_bad_rows = config.bad_rows and any(call.python is not None for call in calls)
        return not any(call.keeps_distinct_values for call in calls) and not config.late_rows and not keeps_bad_rows

    def pre_aggregate(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The local phase: ``batch``'s partial aggregates per (key, slice), with their key
        groups in ``KEY_GROUP_COLUMN`` (hashed from the keys' values), marked ``PARTIALS``.
        Rows with a NULL time, and rows late under their arrival watermark, are counted and
        dropped here; the subtask that receives the partials checks its own watermark too."""
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        batch, ts = self._event_times(batch)
        self._count_null_times(batch, ts)
        # Late under its arrival watermark is a fact of the row alone (not of any state): decided
        # here. The own watermark of this subtask is left out: it depends on when the other
        # workers' watermarks came, and the owner checks its own anyway (``_append_partials``).
        batch, ts = self._drop_late(batch, ts, MIN_WATERMARK)
        batch = self._with_slices(batch, ts)
        self.state.con.register(INPUT_VIEW, batch)
        try:
            from_end = has_from_end(batch)
            sql = self.state.partials_sql(self._prepared_rows_sql(key_group=False, from_end=from_end), key_group=False,
                                          from_end=from_end)
            partials = query_arrow(self.state.con, sql, self.ctx.operator_id)
        finally:
            self.state.con.unregister(INPUT_VIEW)
        self.ctx.count("pre_aggregated_rows", partials.num_rows)
        groups = key_groups(partials, self.state.keys, self.ctx.max_parallelism)
        partials = partials.append_column(KEY_GROUP_COLUMN, groups).replace_schema_metadata(PARTIALS)
        if partials.num_rows == 0:
            return pa.RecordBatch.from_pylist([], partials.schema)
        return partials.combine_chunks().to_batches()[0]

    def _append_partials(self, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
        """The global phase: partials from ``pre_aggregate`` (of any subtask) into the state,
        but those of slices that are late by now, which count their rows as late."""
        if batch.num_rows == 0:
            return []
        slices = batch.column(SLICE)
        cutoff = self._late_cutoff()
        where = ""
        if cutoff is not None and pc.min(slices).as_py() < cutoff:
            late = pc.less(slices, scalar(cutoff))
            # in partials the copy column is the last key
            counted = self._first_copies(batch, late, f"__k{len(self.keys) - 1}")
            self.ctx.count_late(pc.sum(pc.if_else(counted, batch.column("__rows"), scalar(0))).as_py() or 0)
            if pc.all(late).as_py():
                return []
            slices = pc.filter(slices, pc.invert(late))
            where = f" WHERE {SLICE} >= {int_literal(cutoff)}"
        self._extend_earliest_slice(pc.min(slices).as_py())
        columns = [f"CAST({quote_ident(KEY_GROUP_COLUMN)} AS BIGINT) AS key_group"]
        columns += [quote_ident(n) for n in batch.schema.names if n != KEY_GROUP_COLUMN]
        self.state.con.register(INPUT_VIEW, batch)
        try:
            self.state.append_partials(f"SELECT {', '.join(columns)} FROM {quote_ident(INPUT_VIEW)}{where}")
        finally:
            self.state.con.unregister(INPUT_VIEW)
        return []

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        if batch.schema.metadata == PARTIALS:
            return self._append_partials(batch)
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        batch, ts = self._event_times(batch)
        self._count_null_times(batch, ts)
        batch, ts = self._drop_late(batch, ts, self.clock.watermark)
        earliest = pc.min(ts).as_py()
        if earliest is None:
            return []
        self._extend_earliest_slice(self.assigner.slice_start(earliest))
        if self._partials is not None and self._add_partials(batch, ts):
            return []
        if batch.schema.get_field_index(KEY_GROUP_COLUMN) < 0:  # else a parallel exchange computed them
            batch = batch.append_column(KEY_GROUP_COLUMN, self._key_groups(batch))
        batch = self._with_slices(batch, ts)
        if self._bad_rows is not None:
            without_bad_rows(self._append, batch, self._raising_rows, self._keep_bad_rows)
        elif not self._hold(batch):
            self._append(batch)
        return []

    def _add_partials(self, batch: pa.RecordBatch, ts: pa.Array) -> bool:
        """Hold ``batch``'s partials in Arrow (``window_partials``); False where they are not
        (a key or an argument that is an expression, types the path does not take, sums that might
        leave int64): the batch then goes to DuckDB. Past ``small_firing_rows()`` held partials
        they move into DuckDB (``_flush``)."""
        names = batch.schema.names
        columns = {f"__k{i}": _referenced_column(sql, names) for i, (_, sql) in enumerate(self.keys)}
        columns.update({acc.argument_column: _referenced_column(acc.call.argument, names)
                        for acc in self.accumulators if acc.argument_column is not None})
        if any(name is None for name in columns.values()):
            return False
        if ts.null_count:
            valid = pc.is_valid(ts)
            batch, ts = batch.filter(valid), ts.filter(valid)
        prepared = {name: batch.column(column) for name, column in columns.items()}
        if batch.schema.get_field_index(KEY_GROUP_COLUMN) >= 0:  # a parallel exchange computed them
            prepared[KEY_GROUP] = batch.column(KEY_GROUP_COLUMN)
        prepared[SLICE] = self._slices(ts)
        prepared[FROM_END] = (batch.column(FROM_END) if has_from_end(batch)
                              else pa.nulls(batch.num_rows, pa.int64()))
        if not self._partials.add(pa.table(prepared)):
            return False
        if self._partials.rows > small_firing_rows():
            self._flush()
        return True

    def _flush(self) -> None:
        """The partials held in Arrow into the state (``window_partials``), merged per (key,
        slice, first window) in the types the state's own grouping gives them."""
        if not self._partials:
            return
        table = self._partials.take()
        group = ", ".join([*self.state.keys, SLICE, FROM_END])
        merged = ["CAST(SUM(__rows) AS BIGINT) AS __rows"]
        merged += [f"{c.merge_sql(c.name)} AS {c.name}" for acc in self.accumulators for c in acc.columns]
        sql = (f"SELECT CAST(any_value({KEY_GROUP}) AS BIGINT) AS key_group, {group}, {', '.join(merged)} "
               f"FROM {quote_ident(INPUT_VIEW)} GROUP BY {group}")
        self.state.con.register(INPUT_VIEW, table)
        try:
            self.state.append_partials(sql)
        finally:
            self.state.con.unregister(INPUT_VIEW)

    def _hold(self, batch: pa.RecordBatch) -> bool:
        """Keep ``batch`` (prepared: ``_with_slices``) in Arrow until the next watermark, which
        fires its windows from the state and the held rows at once, and need never append them
        where every slice of theirs expires there (``_fires_held``: a cascaded TUMBLE, whose
        input is windows that just fired, saves two statements of three a batch). Only plain
        rows are held: no DISTINCT aggregate, no Python aggregate (a row its ``accumulate``
        raises on fails the batch that brought it, naming the row), no first window
        (``FROM_END``), one schema, and no more rows than a small firing (``small_firing_rows()``:
        memory outside DuckDB stays bounded between watermarks however rare they are)."""
        if self.distincts or self._python or has_from_end(batch) or batch.num_rows > small_firing_rows():
            self._append_held()
            return False
        rows = batch.num_rows + sum(held.num_rows for held in self._held)
        if self._held and (rows > small_firing_rows() or batch.schema != self._held[0].schema):
            self._append_held()
        self._held.append(batch)
        return True

    def _append_held(self) -> None:
        """The held batches into the state, as ``process_batch`` appends a batch."""
        held, self._held = self._held, []
        if held:
            self._append(pa.Table.from_batches(held))

    def _append(self, batch: pa.RecordBatch) -> None:
        """``batch``'s rows into the state, as partials per (key, slice)."""
        self.state.con.register(INPUT_VIEW, batch)
        try:
            from_end = has_from_end(batch)
            self.state.append(self._prepared_rows_sql(from_end=from_end), from_end=from_end)
        finally:
            self.state.con.unregister(INPUT_VIEW)

    def _raising_rows(self, numbered: pa.RecordBatch) -> dict:
        """The rows of ``numbered`` (in ``ROW_NUMBER``) that a Python aggregate's accumulate raises on,
        grouped per (key, slice) as ``_append`` groups them (``bad_aggregate_rows``)."""
        self.state.con.register(INPUT_VIEW, numbered)
        try:
            from_end = has_from_end(numbered)
            sql = self._prepared_rows_sql(from_end=from_end, numbered=True)
            return raising_rows(self.state.con, sql, [*self.state.keys, SLICE, FROM_END], self.state.keys,
                                python_arguments(self.accumulators), self.ctx.operator_id)
        finally:
            self.state.con.unregister(INPUT_VIEW)

    def _keep_bad_rows(self, rows: pa.RecordBatch, failures: list) -> None:
        """The bad rows as they came (one copy of a row expanded per grouping set)."""
        if self.copy_column is not None:
            first = pc.equal(rows.column(self.copy_column), scalar(0))
            rows, failures = rows.filter(first), [f for f, a in zip(failures, first.to_pylist()) if a]
        internal = {KEY_GROUP_COLUMN, FROM_END, SLICE, *([self.copy_column] if self.copy_column else [])}
        self._bad_rows.keep(rows.drop_columns([n for n in rows.schema.names if n in internal]), failures)

    def _drop_late(self, batch: pa.RecordBatch, ts: pa.Array, watermark: int) -> tuple[pa.RecordBatch, pa.Array]:
        """``batch`` (and its times ``ts``) without its late rows, which are counted and kept
        where asked. A row is late when every window of its slice has fired under the watermark
        it met (``row_watermarks``: its arrival watermark, or the larger ``watermark``), that is
        when its time is before ``first_open_slice`` of that watermark. That bound is a step
        function of the watermark, one value for the whole batch unless the batch's watermarks
        cross a slice boundary (``SlicedWindows.late``): a comparison or two per row, not an
        alignment of every row's time."""
        highest = highest_watermark(batch, watermark)
        earliest = pc.min(ts).as_py()
        if highest is None or earliest is None:
            return batch, ts
        if earliest >= self.assigner.first_unfired_slice(highest):  # the common case: no window of a row fired
            return batch, ts
        watermarks = row_watermarks(batch, watermark)
        low = watermarks if isinstance(watermarks, int) else pc.min(watermarks).as_py()
        if earliest < self.assigner.first_open_slice(highest):
            late = self.assigner.late(ts, watermarks, low, highest)
            if pc.any(late).as_py():
                self.late_rows.drop(batch, self._first_copies(batch, late), watermarks)
                keep = pc.invert(late)
                batch, ts = batch.filter(keep), ts.filter(keep)
                if not isinstance(watermarks, int):
                    watermarks = watermarks.filter(keep)
        # where rows met a watermark that had fired some of their slice's windows (not all: those
        # rows are late), they count only in the others, as in Flink: FROM_END, NULL for the rest
        from_end = self.assigner.first_windows(ts, watermarks, low, highest)
        return (batch if from_end is None else batch.append_column(FROM_END, from_end)), ts

    def _first_copies(self, batch: pa.RecordBatch, mask: pa.BooleanArray,
                      copy_column: str | None = None) -> pa.BooleanArray:
        """``mask`` keeping one copy of each row expanded per grouping set: the row itself
        (copy 0 in ``copy_column``, by default the input's copy column)."""
        if self.copy_column is not None:
            mask = pc.and_(mask, pc.equal(batch.column(copy_column or self.copy_column), scalar(0)))
        return mask

    def _count_null_times(self, batch: pa.RecordBatch, ts: pa.Array) -> int:
        """Count the rows of ``batch`` with a NULL time (dropped); how many there are."""
        if ts.null_count:
            self.ctx.count("null_time_rows_dropped", pc.sum(self._first_copies(batch, pc.is_null(ts))).as_py())
        return ts.null_count

    def _late_cutoff(self) -> int | None:
        """Slices before this are late: their windows fired under the own watermark. None before
        any watermark. (Rows are judged by the watermark each met: ``_drop_late``.)"""
        return self.assigner.first_open_slice(self.clock.watermark) if self.clock.started else None

    def _extend_earliest_slice(self, slice_start: int) -> None:
        if self._earliest_slice is None or slice_start < self._earliest_slice:
            self._earliest_slice = slice_start

    def _key_groups(self, batch: pa.RecordBatch) -> pa.Int32Array:
        """The stable key group of every row's key (``engine.state.key_groups``).

        Keys are column references (the planner computes key expressions before
        the exchange); a key that is still an expression is evaluated first.
        """
        names = batch.schema.names
        columns = [_referenced_column(sql, names) for _, sql in self.keys]
        if all(c is not None for c in columns):
            return key_groups(batch, columns, self.ctx.max_parallelism)
        select = ", ".join(f"({sql}) AS __k{i}" for i, (_, sql) in enumerate(self.keys))
        self.state.con.register(INPUT_VIEW, batch)
        try:
            keys = query_arrow(
                self.state.con, f"SELECT {select} FROM {quote_ident(INPUT_VIEW)}", self.ctx.operator_id
            )
        finally:
            self.state.con.unregister(INPUT_VIEW)
        return key_groups(keys, keys.schema.names, self.ctx.max_parallelism)

    def _event_times(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.Array]:
        """The batch with its time column in µs, and that column as int64 (a zero-copy view)."""
        return event_times(batch, self.assigner.time_column, self.ctx.operator_id)

    def _with_slices(self, batch: pa.RecordBatch, ts: pa.Array) -> pa.RecordBatch:
        """``batch`` with each row's slice start (µs; NULL for a NULL time) in ``SLICE``, from its
        times ``ts`` in µs: in numpy, where DuckDB's aligning of every row in the statement that
        groups them cost as much as the grouping (``windows.align_numpy``)."""
        return batch.append_column(SLICE, self._slices(ts))

    def _slices(self, ts: pa.Array) -> pa.Array:
        """Each row's slice start (µs; NULL for a NULL time) from its times ``ts`` in µs."""
        if ts.null_count:
            return align_array(ts, self.assigner.slice_size, self.assigner.offset)
        return arrow_array(align_numpy(numpy_values(ts), self.assigner.slice_size, self.assigner.offset))

    def _prepared_rows_sql(self, *, key_group: bool = True, from_end: bool = False, numbered: bool = False) -> str:
        """The batch's rows that count, with keys, slice, first window (``from_end``: the batch
        has ``FROM_END``), arguments and filters computed (and ``numbered``: ``ROW_NUMBER``)."""
        ts_col = quote_ident(self.assigner.time_column)
        columns = [f"CAST({quote_ident(KEY_GROUP_COLUMN)} AS BIGINT) AS key_group"] if key_group else []
        columns += [f"({sql}) AS __k{i}" for i, (_, sql) in enumerate(self.keys)]
        columns.append(SLICE)  # (``_with_slices``)
        columns.append(quote_ident(FROM_END) if from_end else f"NULL::BIGINT AS {FROM_END}")
        columns += argument_columns(self.accumulators, self.distincts)
        columns += [quote_ident(ROW_NUMBER)] if numbered else []
        where = f"{ts_col} IS NOT NULL"
        return f"SELECT {', '.join(columns)} FROM {quote_ident(INPUT_VIEW)} WHERE {where}"

    # -- watermarks ----------------------------------------------------------
    def process_watermark(self, watermark: int) -> Iterable[pa.RecordBatch]:
        """The windows this watermark fires, in Arrow batches of at most ``OUTPUT_BATCH_ROWS``
        rows. A firing the state bounds to ``small_firing_rows()`` rows is read at once, its
        statement planned once (``duckdb_sql.run_arrow``); one that turns out to fit in two
        batches is read at once too; both are returned as a list. A larger one is an iterator that reads the rest from DuckDB as it is consumed (so no more than a
        batch of it is ever held outside DuckDB's limited, spilling memory), and deletes the
        fired slices when it ends. The windows are fired (the clock has moved) either way."""
        self.open()
        fired_before = self.clock.watermark
        if not self.clock.advance(watermark):
            return []
        upto = self.assigner.last_fired_slice(watermark)
        if self._earliest_slice is None or self._earliest_slice > upto:
            return []
        expired = self.assigner.last_expired_slice(watermark)
        if self._partials:
            if not self.state.rows() and not self._held:  # the state is all in Arrow
                table = self._partials.fire(watermark, fired_before)
                if table is not None:
                    return self._firing.start_small(table, lambda: self._evict(expired))
            self._flush()
        if self._held and not self._fires_held(watermark, fired_before, expired):
            self._append_held()
        if self._held:  # fired with the state, never appended
            table = self._small_firing(upto, watermark, fired_before, held=True)
            self._held = []
            return self._firing.start_small(table, lambda: self._evict(expired))
        if self._fired_rows_at_most(watermark, fired_before) <= small_firing_rows():
            return self._firing.start_small(self._small_firing(upto, watermark, fired_before),
                                            lambda: self._evict(expired))
        materialize = self.state.rows() > MATERIALIZE_FIRING_ROWS
        batches = stream_arrow(self.state.reader(),
                               self._emit_sql(upto, watermark, fired_before, materialize=materialize),
                               self.ctx.operator_id)
        return self._firing.start_stream(batches, lambda: self._evict(expired))

    def _fires_held(self, watermark: int, fired_before: int, expired: int) -> bool:
        """Whether ``watermark`` fires every window of the held rows' slices, in a small firing
        (``small_firing_rows()``, counting a row of partials per held row)."""
        held_rows = sum(batch.num_rows for batch in self._held)
        last_slice = max(pc.max(batch.column(SLICE)).as_py() for batch in self._held)
        return (last_slice <= expired
                and self._fired_rows_at_most(watermark, fired_before, held_rows) <= small_firing_rows())

    def _small_firing(self, upto: int, watermark: int, fired_before: int, *, held: bool = False) -> pa.Table:
        """A firing of at most ``small_firing_rows()`` rows, read at once and put in output order
        in Arrow: DuckDB's ORDER BY cost more than its grouping (q5: 5 of 13 ms a firing, of
        18K rows). Where a key's type may sort otherwise in Arrow (floats, nested types: DuckDB's
        order is the one the operator keeps) the ordered statement runs instead, from then on.
        ``held``: the held batches count as if appended (``_hold``)."""
        reader = self.state.reader()
        if not held:
            return self._sorted_firing(reader, upto, watermark, fired_before, held)
        reader.register(INPUT_VIEW, pa.Table.from_batches(self._held))
        try:
            return self._sorted_firing(reader, upto, watermark, fired_before, held)
        finally:
            reader.unregister(INPUT_VIEW)

    def _sorted_firing(self, reader, upto: int, watermark: int, fired_before: int, held: bool) -> pa.Table:
        """``_small_firing``'s statement run on ``reader`` and its rows put in output order."""
        oid = self.ctx.operator_id
        if self._arrow_sorts is False:
            return run_arrow(reader, self._emit_sql(upto, watermark, fired_before, held=held), oid)
        table = run_arrow(reader, self._emit_sql(upto, watermark, fired_before, ordered=False, held=held), oid)
        order = self._order_columns()
        if self._arrow_sorts is None:
            self._arrow_sorts = all(_sorts_as_duckdb(table.schema.field(c).type) for c in order)
            if not self._arrow_sorts:
                return run_arrow(reader, self._emit_sql(upto, watermark, fired_before, held=held), oid)
        if table.num_rows > 1:
            # (NULLs last: Arrow's default, and DuckDB's)
            table = table.take(pc.sort_indices(table, sort_keys=[(c, "ascending") for c in order]))
        return table.drop_columns(order)

    def _order_columns(self) -> list[str]:
        """The columns a firing is ordered by (``_emit_sql``): window_end, then the keys."""
        return ["__order_end", *(f"__order_k{i}" for i in range(len(self.keys)))]

    def _fired_rows_at_most(self, watermark: int, fired_before: int, held_rows: int = 0) -> int:
        """A bound on the rows a watermark fires: a row of partials per (key, slice) — and per held
        row — counts in at most every window that fires (window ends are a slice apart), and in
        no more than its slice is part of."""
        width = self.assigner.slice_size
        firing = (watermark - fired_before) // width + 1
        return (self.state.rows() + held_rows) * min(firing, self.assigner.windows_per_slice)

    def _evict(self, expired: int) -> None:
        """Delete the slices up to ``expired`` (every window of theirs has fired). The earliest
        slice is then a lower bound, not read back: no slice up to ``expired`` is left (None:
        no partials left at all); a DELETE that the bound says finds nothing is not run."""
        if self._fired_table:
            self.state.run(f"DROP TABLE {FIRED_TABLE}")
            self._fired_table = False
        if self._earliest_slice is None or self._earliest_slice > expired:
            return
        if self._partials is not None:
            self._partials.evict(expired)
        in_arrow = self._partials.earliest_slice if self._partials is not None else None
        if not self.state.rows():  # (the held rows that fired were never appended)
            self._earliest_slice = in_arrow
            return
        self.state.evict(expired)
        self._earliest_slice = expired + self.assigner.slice_size if self.state.rows() else in_arrow

    def _emit_sql(self, upto: int, watermark: int, fired_before: int, *, materialize: bool = False,
                  ordered: bool = True, held: bool = False) -> str:
        """Fired windows with their bounds, filtered by HAVING, projected, in a stable order.
        With ``materialize`` the windows are first computed into ``FIRED_TABLE`` and the query
        returned sorts that table: DuckDB then never groups and sorts at once, which a large
        firing in a small memory share cannot (16M windows in 64 MB ran out of memory). Not
        ``ordered``: unsorted, with the ``_order_columns()`` last, for the caller to sort.
        ``held``: the held batches, registered as ``INPUT_VIEW``, count as if appended."""
        held_partials = self.state.partials_sql(self._prepared_rows_sql(), from_end=False) if held else None
        fired = self.state.fired_sql(
            self.assigner.windows_sql(SLICE), upto, watermark, fired_before, held_partials
        )
        columns = [f"__k{i} AS {quote_ident(name)}" for i, (name, _) in enumerate(self.keys)]
        columns += [
            f"make_timestamp({WINDOW_START}) AS window_start",
            f"make_timestamp({WINDOW_END}) AS window_end",
            f"make_timestamp({WINDOW_END} - {WINDOW_TIME_LAG_US}) AS window_time",
            *(quote_ident(c.name) for c in self.calls),
            f"{WINDOW_END} AS __order_end",
            *(f"__k{i} AS __order_k{i}" for i in range(len(self.keys))),
        ]
        projection = ", ".join(f"{sql} AS {quote_ident(name)}" for name, sql in self.projection)
        order_columns = self._order_columns()
        order = ", ".join(f"fired_windows.{c}" for c in order_columns)
        if materialize or not ordered:  # the order goes out too: sorted from FIRED_TABLE, or by the caller
            projection += "".join(f", fired_windows.{c}" for c in order_columns)
        sql = f"SELECT {projection} FROM (SELECT {', '.join(columns)} FROM ({fired})) AS fired_windows"
        if self.having:
            sql += f" WHERE {self.having}"
        if materialize:
            self.state.run(f"CREATE OR REPLACE TABLE {FIRED_TABLE} AS {sql}")
            self._fired_table = True
            names = ", ".join(quote_ident(name) for name, _ in self.projection)
            return f"SELECT {names} FROM {FIRED_TABLE} ORDER BY {', '.join(order_columns)}"
        return f"{sql} ORDER BY {order}" if ordered else sql

    # -- checkpoints ---------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """``{"version", "watermark", "max_parallelism", "tables": {name: pa.Table}}``;
        every table has a ``key_group`` column and is ordered by it."""
        self.open()
        self._append_held()  # (a snapshot holds the state whole, wherever its rows wait)
        if self._partials is not None:
            self._flush()
        return {
            "version": SNAPSHOT_VERSION,
            "watermark": self.clock.watermark,
            "max_parallelism": self.ctx.max_parallelism,
            "tables": self.state.snapshot(self.ctx),
        }

    @staticmethod
    def merge_snapshots(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
        """The snapshots of several subtasks as one, for restoring at another parallelism."""
        return merge_snapshots(snapshots, version=SNAPSHOT_VERSION, what="window")

    def restore(self, state: dict[str, Any]) -> None:
        """Load a snapshot (or merged snapshots), keeping the key groups this subtask owns."""
        self.open()
        oid = self.ctx.operator_id
        tables = owned_tables(state, version=SNAPSHOT_VERSION, max_parallelism=self.ctx.max_parallelism,
                              key_groups=self.ctx.owned_key_groups(), what="window", operator_id=oid)
        self.clock = EventTimeClock(state["watermark"])
        self._held = []
        if self._partials is not None:
            self._partials.clear()
        self.state.restore(tables)
        self._earliest_slice = self.state.earliest_slice()


"""ArrowPartials: a window aggregate's partials of plain COUNT, SUM, MIN and MAX kept in Arrow.

Where every aggregate is a plain ``COUNT``, ``SUM`` (of an integer column), ``MIN`` or ``MAX``
over input columns, the keys are input columns and the result is those values as they are (no
HAVING, no expression), a batch's rows and a firing's windows need no SQL: ``window_groups``
groups both (numpy's ``bincount`` for one integer key, else pyarrow's hash grouping), and no
DuckDB statement runs (10M bids, TUMBLE: a statement a batch and one a watermark, each several
ms of planning besides its work, were most of the operator's time).

1. ``add`` groups a prepared batch (``WindowAggregate._with_slices``) per (key, slice, first
   window) into the columns of ``window_accumulators`` (``WindowState``) and holds them. A batch
   whose types the path does not take (``supports``), or whose sums might leave int64 (the
   largest absolute value times the rows), is refused: the caller appends it to DuckDB.
   Key groups are hashed per partial (``key_groups`` of its keys), not per row.
2. ``fire`` computes a watermark's firing from the held partials alone (the caller sees to it
   that DuckDB holds none): each partial joins the windows of its slice that fire, as
   ``WindowState.fired_sql`` spells them, and a second grouping merges them per (key, window);
   the rows come out in DuckDB's order (window_end, then keys, NULLs last). None where a merged
   sum might leave int64 or leaves its result type: the caller fires in DuckDB instead, which
   raises the overflow error.
3. ``evict`` drops the slices all of whose windows fired; the held partials are regrouped once
   they reach twice their number after the last regrouping, so they stay one row per (key, slice)
   or near it.
4. ``take`` hands every held partial over (to be appended to DuckDB: ``WindowAggregate._flush``)
   when they pass ``small_firing_rows()`` rows, before a snapshot, or before a firing that DuckDB
   computes: memory outside DuckDB stays bounded, and the state is whole in DuckDB wherever it
   is read there.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.operators.accumulators import INTEGER_RANGES, Accumulator, AggregateCall
from weir.engine.operators.window_state import FROM_END, SLICE, WINDOW_END, WINDOW_START
from weir.engine.operators.window_groups import group
from weir.engine.operators.windows import WINDOW_TIME_LAG_US, SlicedWindows, align_numpy
from weir.engine.pandas_import import arrow_array, numpy_values, scalar
from weir.engine.state.key_groups import key_groups

KEY_GROUP = "key_group"
ROWS = "__rows"
#: Merging partials of each kind (``window_groups.group``).
MERGES = {"count": "sum", "sum": "sum", "min": "min", "max": "max"}
#: Held partials are regrouped past this many rows (and twice their number after the last time).
REGROUP_MIN_ROWS = 16_384
INT64_LIMIT = 2**63


def _plain(t: pa.DataType) -> bool:
    """Types whose MIN and MAX (and grouping, and ascending order) pyarrow and DuckDB agree on."""
    return (pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)
            or pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t))


def _fits(values: list[pa.Array | pa.ChunkedArray], rows: int) -> bool:
    """Whether no sum of up to ``rows`` of ``values`` can leave int64."""
    for column in values:
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None and max(abs(low), abs(high)) * rows >= INT64_LIMIT:
            return False
    return True


def _taken(column: pa.ChunkedArray, rows: np.ndarray) -> pa.Array:
    """``column``'s values at ``rows``: in numpy where it has integers and no NULL (Arrow's pool
    returns pages a firing's copies take, which cost system time), else by Arrow's ``take``."""
    if pa.types.is_integer(column.type) and not column.null_count:
        return arrow_array(numpy_values(column)[rows])
    return column.take(arrow_array(rows)).combine_chunks()


class ArrowPartials:
    """The held partials of one window aggregate, and its firings computed from them."""

    def __init__(self, assigner: SlicedWindows, keys: int, accumulators: list[Accumulator],
                 output: list[tuple[str, str]], max_parallelism: int):
        self.assigner = assigner
        self.max_parallelism = max_parallelism
        self.keys = [f"__k{i}" for i in range(keys)]
        self.accumulators = accumulators
        #: (output name, source column of the fired windows) in projection order.
        self.output = output
        self._tables: list[pa.Table] = []
        self.rows = 0
        self._rows_after_regroup = 0
        #: The lowest slice held (None: none held).
        self.earliest_slice: int | None = None

    @staticmethod
    def eligible(calls: list[AggregateCall]) -> bool:
        """Whether every aggregate is one ``add`` and ``fire`` compute: no DISTINCT, FILTER,
        AVG or Python aggregate; SUM's result an integer type."""
        for call in calls:
            if call.python is not None or call.distinct or call.filter is not None:
                return False
            if call.function not in MERGES:
                return False
            if call.function == "sum" and call.result_type not in INTEGER_RANGES:
                return False
        return True

    def supports(self, prepared: pa.Table) -> bool:
        """Whether ``add`` takes rows of these types: keys that group and sort in Arrow as in
        DuckDB, SUM of integers, MIN and MAX of ``_plain`` types."""
        schema = prepared.schema
        if not all(_plain(schema.field(k).type) for k in self.keys):
            return False
        for acc in self.accumulators:
            if acc.argument_column is None:
                continue
            t = schema.field(acc.argument_column).type
            kind = acc.call.function
            if (kind == "sum" and not pa.types.is_signed_integer(t)) or (kind in ("min", "max") and not _plain(t)):
                return False
            if kind == "count" and pa.types.is_nested(t):
                return False
        return True

    def __bool__(self) -> bool:
        return self.rows > 0

    # -- batches ---------------------------------------------------------
    def _aggregates(self, merge: bool, key_group: bool) -> list[tuple[str, str | None, str]]:
        """(column, source column, how) of a grouping into partials (``merge``: of partials,
        else of rows), ``key_group``'s first (a function of the key: any value of the group is its)."""
        found = [(KEY_GROUP, KEY_GROUP, "min")] if key_group else []
        if merge:
            found.append((ROWS, ROWS, "sum"))
            return found + [(c.name, c.name, MERGES[c.partial.kind]) for acc in self.accumulators for c in acc.columns]
        found.append((ROWS, None, "count_all"))
        for acc in self.accumulators:
            (column,) = acc.columns
            how = "count_all" if acc.argument_column is None else column.partial.kind
            found.append((column.name, acc.argument_column, how))
        return found

    def _grouped(self, table: pa.Table, merge: bool) -> pa.Table:
        """``table`` (rows, or partials with ``merge``) grouped per (key, slice, first window),
        in the columns of ``window_accumulators``; ``key_group`` where ``table`` has one."""
        from_end = table.column(FROM_END).null_count < table.num_rows  # else not grouped by: all NULL
        aggregates = self._aggregates(merge, KEY_GROUP in table.column_names)
        grouped, _ = group(table, self.keys, SLICE, self.assigner.slice_size, [FROM_END] if from_end else [],
                           aggregates)
        if not from_end:
            grouped = grouped.add_column(len(self.keys) + 1, FROM_END, pa.nulls(grouped.num_rows, pa.int64()))
        if KEY_GROUP in grouped.column_names:  # (first, as in the state's table)
            index = grouped.column_names.index(KEY_GROUP)
            grouped = grouped.remove_column(index).add_column(0, KEY_GROUP, grouped.column(index))
        return grouped

    def add(self, prepared: pa.Table) -> bool:
        """Hold ``prepared``'s partials (its ``key_group``, keys ``__k*``, ``SLICE``, ``FROM_END``
        and aggregate arguments ``__a*``, no NULL slice); False (nothing held) where this path
        does not take it (``supports``, or a sum that might leave int64)."""
        sums = [prepared.column(acc.argument_column) for acc in self.accumulators
                if acc.call.function == "sum"]
        if not self.supports(prepared) or not _fits(sums, prepared.num_rows):
            return False
        partials = self._grouped(prepared, merge=False)
        if KEY_GROUP not in partials.column_names:  # hashed per partial, not per row
            partials = partials.add_column(0, KEY_GROUP, key_groups(partials, self.keys, self.max_parallelism))
        self._tables.append(partials)
        self.rows += partials.num_rows
        low = pc.min(partials.column(SLICE)).as_py()
        if self.earliest_slice is None or low < self.earliest_slice:
            self.earliest_slice = low
        return True

    def table(self) -> pa.Table:
        """Every held partial as one table (in the columns of ``window_accumulators``)."""
        if len(self._tables) > 1:
            self._tables = [pa.concat_tables(self._tables).combine_chunks()]
        return self._tables[0]

    def take(self) -> pa.Table:
        """Every held partial; none is held after."""
        table = self.table()
        self.clear()
        return table

    def clear(self) -> None:
        self._tables, self.rows, self._rows_after_regroup, self.earliest_slice = [], 0, 0, None

    # -- firing ----------------------------------------------------------
    def fire(self, watermark: int, fired_before: int) -> pa.Table | None:
        """The windows with ``fired_before < window_end - 1 ms <= watermark`` of the held
        partials, in the output's columns and order; None where a sum might leave int64 or
        leaves its result type (the caller fires in DuckDB)."""
        held = self.table()
        pairs = self._fired_pairs(held, watermark, fired_before)
        if pairs is None:
            return pa.table({})  # (no row: the caller emits nothing)
        sums = [pairs.column(c.name) for acc in self.accumulators if acc.call.function == "sum" for c in acc.columns]
        if not _fits(sums, pairs.num_rows):
            return None
        merged, ordered = group(pairs, self.keys, WINDOW_END, self.assigner.slice_size, [],
                                [(c.name, c.name, MERGES[c.partial.kind]) for acc in self.accumulators
                                 for c in acc.columns])
        values = {}
        for acc in self.accumulators:
            (column,) = acc.columns
            value = merged.column(column.name)
            if acc.call.function == "sum":
                value = self._in_result_type(value, acc.call.result_type)
                if value is None:
                    return None
            values[acc.call.name] = value
        fired = self._projected(merged, values)
        if not ordered:
            fired = fired.take(pc.sort_indices(merged, sort_keys=[(WINDOW_END, "ascending"),
                                                                  *((k, "ascending") for k in self.keys)]))
        return fired.combine_chunks()

    def _fired_pairs(self, held: pa.Table, watermark: int, fired_before: int) -> pa.Table | None:
        """The held partials joined to each of their slice's windows that fires, its end in
        ``WINDOW_END`` (the join of ``WindowState.fired_sql``), taken at once (one copy: a filter
        per window index cost a copy each); None where no window fires."""
        a = self.assigner
        slices = numpy_values(held.column(SLICE))
        from_end = held.column(FROM_END)
        counts_from = None
        if from_end.null_count < held.num_rows:
            counts_from = numpy_values(pc.fill_null(from_end, scalar(int(np.iinfo(np.int64).min))))
        windows = getattr(a, "windows_per_period", a.windows_per_slice)
        cumulate = a.kind == "cumulate"
        period_start = align_numpy(slices, a.size, a.offset) if cumulate else None
        rows, ends = [], []
        for index in range(windows):
            end = slices + a.slice_size * (index + 1)
            fires = (end - WINDOW_TIME_LAG_US <= watermark) & (end - WINDOW_TIME_LAG_US > fired_before)
            if counts_from is not None:
                fires &= end >= counts_from
            if cumulate:
                fires &= end <= period_start + a.size
            rows.append(np.flatnonzero(fires))
            ends.append(end[rows[-1]])
        taken = np.concatenate(rows)
        if not taken.size:
            return None
        names = [*self.keys, *(c.name for acc in self.accumulators for c in acc.columns)]
        columns = [_taken(held.column(name), taken) for name in names]
        return pa.Table.from_arrays([*columns, arrow_array(np.concatenate(ends))], names=[*names, WINDOW_END])

    @staticmethod
    def _in_result_type(value: pa.ChunkedArray, kind: str) -> pa.ChunkedArray | None:
        """Merged sums (int64) in SUM's result type; None where one leaves it."""
        low, high = INTEGER_RANGES[kind]
        if kind != "BIGINT":
            bounds = pc.min_max(value)
            if bounds["min"].as_py() is not None and (bounds["min"].as_py() < low or bounds["max"].as_py() > high):
                return None
        return value.cast({"TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(),
                           "BIGINT": pa.int64()}[kind])

    def _projected(self, merged: pa.Table, values: dict[str, pa.ChunkedArray]) -> pa.Table:
        """The fired windows in the output's columns (``output``: key, window bound or aggregate)."""
        end = merged.column(WINDOW_END)
        ends = numpy_values(end)
        a = self.assigner
        starts = (align_numpy(ends - a.slice_size, a.size, a.offset) if a.kind == "cumulate" else ends - a.size)
        micros = pa.timestamp("us")
        sources = {WINDOW_START: arrow_array(starts).view(micros), WINDOW_END: arrow_array(ends).view(micros),
                   "window_time": arrow_array(ends - WINDOW_TIME_LAG_US).view(micros),
                   **{k: merged.column(k) for k in self.keys}, **values}
        return pa.Table.from_arrays([sources[source] for _, source in self.output],
                                    names=[name for name, _ in self.output])

    # -- eviction --------------------------------------------------------
    def evict(self, expired: int) -> None:
        """Drop every slice starting at or before ``expired``; regroup what is left where it has
        doubled since the last regrouping."""
        if not self.rows or self.earliest_slice > expired:
            return
        held = self.table()
        kept = held.filter(pc.greater(held.column(SLICE), scalar(expired)))
        self._tables = [kept] if kept.num_rows else []
        self.rows = kept.num_rows
        self._rows_after_regroup = min(self._rows_after_regroup, self.rows)
        self.earliest_slice = expired + self.assigner.slice_size if self.rows else None
        self.regroup()

    def regroup(self) -> None:
        """Merge the held partials into one row per (key, slice, first window) where they have
        doubled since the last time (and passed ``REGROUP_MIN_ROWS``)."""
        if self.rows - self._rows_after_regroup <= max(self._rows_after_regroup, REGROUP_MIN_ROWS):
            return
        merged = self._grouped(self.table(), merge=True)
        self._tables = [merged]
        self.rows = self._rows_after_regroup = merged.num_rows

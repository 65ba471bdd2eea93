"""Grouping rows per (key, slot) in Arrow and numpy: COUNT, SUM, MIN and MAX (``window_partials``).

``group`` groups a table by its key columns and a slot column (a slice start or a window end, µs,
a multiple of ``width`` apart) and aggregates columns: ``count_all`` (rows), ``count`` (non-NULL
values), ``sum``, ``min``, ``max`` (NULL where a group has no value). Two ways, one result:

1. Dense, in numpy, where there is one integer key without NULLs, no other group column, integer
   arguments and the keys' range times the slots' is small (``DENSE_BINS``): each row's
   group is its bin ``slot index * key range + key - lowest key``; ``np.bincount`` counts and
   sums (its float64 sums are exact below 2**53, ``EXACT_SUMS``, which the rows' bound checks
   first), ``np.minimum.at``/``np.maximum.at`` take the extremes, and the groups come out in
   (slot, key) order: a window's firing needs no sort. (A batch of 65,536 bids: 0.65 ms against
   pyarrow's 2 ms and DuckDB's 4 ms a statement.)
2. Else pyarrow's hash grouping (``Table.group_by``), in no particular order.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.pandas_import import arrow_array, numpy_values

#: The dense way's bins at most: ``DENSE_BINS_PER_ROW`` per row, and this many besides.
DENSE_BINS = 65_536
DENSE_BINS_PER_ROW = 4
#: ``np.bincount`` sums in float64: exact while every partial sum stays below this.
EXACT_SUMS = 2**53


def group(table: pa.Table, keys: list[str], slot: str, width: int, extra: list[str],
          aggregates: list[tuple[str, str | None, str]]) -> tuple[pa.Table, bool]:
    """``table`` grouped by ``keys``, ``slot`` and ``extra``, with ``aggregates`` (column,
    source column — None for ``count_all`` —, how) after them; and whether the groups are in
    (slot, keys) order."""
    if not extra:
        dense = _dense(table, keys, slot, width, aggregates)
        if dense is not None:
            return dense, True
    groups = [*keys, slot, *extra]
    grouped = table.group_by(groups, use_threads=False).aggregate(
        [([] if source is None else source, how) for _, source, how in aggregates])
    # (pyarrow puts the group columns first or last, by version: the aggregates are the others)
    aggregated = [c for name, c in zip(grouped.column_names, grouped.columns) if name not in groups]
    return pa.Table.from_arrays([grouped.column(g) for g in groups] + aggregated,
                                names=groups + [name for name, _, _ in aggregates]), False


def _values(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """An integer column's values (NULLs as 0) and where they are valid (None: all)."""
    if column.null_count == 0:
        return numpy_values(column), None
    return numpy_values(pc.fill_null(column, 0)), numpy_values(pc.is_valid(column))


def _dense(table: pa.Table, keys: list[str], slot: str, width: int,
           aggregates: list[tuple[str, str | None, str]]) -> pa.Table | None:
    """``group``'s dense way, or None where it does not apply."""
    if len(keys) != 1 or not table.num_rows:
        return None
    key = table.column(keys[0])
    if not pa.types.is_integer(key.type) or key.type == pa.uint64() or key.null_count:
        return None  # (a uint64 past int64's range would wrap in the bins' arithmetic)
    for _, source, how in aggregates:
        if how != "count_all" and how != "count" and not pa.types.is_integer(table.column(source).type):
            return None
    rows = table.num_rows
    key_values, slots = numpy_values(key), numpy_values(table.column(slot))
    low_key, low_slot = int(key_values.min()), int(slots.min())
    key_range = int(key_values.max()) - low_key + 1
    bins = key_range * ((int(slots.max()) - low_slot) // width + 1)
    if bins > DENSE_BINS + DENSE_BINS_PER_ROW * rows:
        return None
    sums = {}
    for _, source, how in aggregates:
        if how == "sum" and source not in sums:
            values, valid = _values(table.column(source))
            if values.size and max(-int(values.min()), int(values.max())) * rows >= EXACT_SUMS:
                return None
            sums[source] = (values, valid)
    bin_of = (slots - low_slot) // width * key_range + (key_values.astype(np.int64) - low_key)
    counts = np.bincount(bin_of, minlength=bins)
    found = np.flatnonzero(counts)
    columns = [arrow_array((found % key_range + low_key).astype(key_values.dtype)),
               arrow_array(found // key_range * width + low_slot)]
    for _, source, how in aggregates:
        if how == "count_all":
            columns.append(arrow_array(counts[found]))
            continue
        values, valid = sums[source] if source in sums else _values(table.column(source))
        at = bin_of if valid is None else bin_of[valid]
        present = counts if valid is None else np.bincount(at, minlength=bins)
        if how == "count":
            columns.append(arrow_array(present[found]))
            continue
        empty = None if valid is None else present[found] == 0
        if how == "sum":
            total = np.bincount(bin_of, weights=values, minlength=bins)[found].astype(np.int64)
            columns.append(arrow_array(total, mask=empty))
            continue
        kept = values if valid is None else values[valid]
        limits = np.iinfo(values.dtype)
        extreme = np.full(bins, limits.max if how == "min" else limits.min, values.dtype)
        (np.minimum if how == "min" else np.maximum).at(extreme, at, kept)
        columns.append(arrow_array(extreme[found], mask=empty).cast(table.column(source).type))
    names = [keys[0], slot] + [name for name, _, _ in aggregates]
    return pa.Table.from_arrays(columns, names=names)

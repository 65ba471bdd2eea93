"""Gaps and islands over rows sorted by (key, time), in one vectorised pass.

A SESSION window's batch sessions are islands: per key, in time order, a row more than ``gap``
after the row before it starts a new one. In SQL that is two window functions over the same
partitioning and order (``lag``, then a running ``sum``), which DuckDB sorts for twice; here the
rows are sorted once (by DuckDB) and the islands numbered by comparing every row with the one
before it (pyarrow): a new island where the key differs — NULL equal to NULL and NaN to NaN, as
``PARTITION BY`` groups them — or the time moved on by more than ``gap``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.pandas_import import arrow_array, numpy_values, scalar


def comparable(kind: pa.DataType) -> bool:
    """Whether keys of this Arrow type are compared here (else SQL finds the islands)."""
    if pa.types.is_dictionary(kind):
        return comparable(kind.value_type)
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
            or pa.types.is_decimal(kind) or pa.types.is_temporal(kind) or pa.types.is_string(kind)
            or pa.types.is_large_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
            or pa.types.is_fixed_size_binary(kind) or kind == pa.string_view())


def _same_as_previous(column: pa.Array) -> pa.BooleanArray:
    """For rows 1..n-1: whether the value equals the previous row's, NULL equal to NULL."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    after, before = column.slice(1), column.slice(0, len(column) - 1)
    same = pc.fill_null(pc.equal(after, before), False)
    both_null = pc.and_(pc.is_null(after), pc.is_null(before))
    same = pc.or_(same, both_null)
    if pa.types.is_floating(column.type):
        both_nan = pc.fill_null(pc.and_(pc.is_nan(after), pc.is_nan(before)), False)
        same = pc.or_(same, both_nan)
    return same


def island_numbers(keys: list[pa.Array], times: pa.Array, gap: int) -> pa.Int64Array:
    """The island of every row (1, 2, ...; unique across keys) of rows sorted by ``keys`` then
    ``times`` (int64, no NULLs): a new one where a key changes or ``times`` grows by more than ``gap``."""
    rows = len(times)
    if rows == 0:
        return pa.array([], pa.int64())
    times = times.cast(pa.int64()) if times.type != pa.int64() else times
    new = pc.greater(pc.subtract(times.slice(1), times.slice(0, rows - 1)), scalar(gap))
    for column in keys:
        new = pc.or_(new, pc.invert(_same_as_previous(column)))
    starts = pa.concat_arrays([pa.array([True], pa.bool_()), new]).cast(pa.int64())
    return pc.cumulative_sum(starts)


def key_time_order(table: pa.Table, keys: list[str], time: str) -> pa.Array:
    """The positions of ``table``'s rows sorted by ``keys`` then ``time`` (int64, no NULLs), NULL
    keys last; rows equal in both in no particular order. One integer key without NULLs, whose
    span and the times' fit in 62 bits together (ids, and a batch's seconds of µs), is packed
    with the time into one int64 that numpy sorts, in under half the time of pyarrow's sort over
    two columns; where the row's position fits in the bits left, it is packed below them and
    numpy sorts the values themselves (SIMD: 65,536 rows in 1.1 ms, where their ``argsort``
    takes 4.9 ms) and the positions are read off the low bits. Other keys go to
    ``pc.sort_indices`` (which raises ``ArrowNotImplementedError`` for a type it cannot sort)."""
    if len(keys) == 1 and len(table) > 0 and _packs(table.column(keys[0])):
        key, times = table.column(keys[0]), table.column(time)
        low, high = (v.as_py() for v in pc.min_max(key).values())
        earliest, latest = (v.as_py() for v in pc.min_max(times).values())
        time_bits = (latest - earliest).bit_length()
        key_bits = (high - low).bit_length()
        if key_bits + time_bits <= 62:
            packed = ((numpy_values(key).astype(np.int64) - low) << time_bits) | (numpy_values(times) - earliest)
            position_bits = (len(table) - 1).bit_length()
            if key_bits + time_bits + position_bits <= 62:
                packed = (packed << position_bits) | np.arange(len(table), dtype=np.int64)
                packed.sort()
                return arrow_array(packed & ((1 << position_bits) - 1))
            return arrow_array(np.argsort(packed))
    return pc.sort_indices(table, [(k, "ascending") for k in [*keys, time]])


def _packs(key: pa.ChunkedArray) -> bool:
    """An integer key without NULLs whose values are all int64s (a uint64 may not be)."""
    kind = key.type
    signed = pa.types.is_signed_integer(kind)
    return (signed or pa.types.is_unsigned_integer(kind) and kind.bit_width <= 32) and key.null_count == 0


def merged_intervals(keys: list[pa.Array], starts: pa.Array,
                     ends: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Intervals ``[start, end]`` (at least one) sorted by ``keys`` then start (int64, no NULLs),
    merged where they touch: per row, the number of its merged interval (1, 2, ...; unique across
    keys), that interval's start and its end. A new one begins where a key changes or the row
    starts after every earlier interval of its key ended. None when the keys' count and the
    times' span overflow the int64 that holds the running maximum (the key's rank above the time)."""
    rows = len(starts)
    new = np.zeros(rows, dtype=bool)
    new[0] = True
    for column in keys:
        if rows > 1:
            new[1:] |= ~numpy_values(_same_as_previous(column))
    begin, end = numpy_values(starts), numpy_values(ends)
    low = int(min(begin.min(), end.min()))
    span = int(max(begin.max(), end.max())) - low + 1
    rank = np.cumsum(new)
    if int(rank[-1]) * span >= 1 << 62:
        return None
    # Ends lifted by their key's rank: one running maximum over all rows is then one per key.
    latest = np.maximum.accumulate(rank * span + (end - low))
    new[1:] |= rank[1:] * span + (begin[1:] - low) > latest[:-1]
    firsts = np.flatnonzero(new)
    sizes = np.diff(np.append(firsts, rows))
    return (np.repeat(np.arange(1, len(firsts) + 1), sizes), np.repeat(begin[firsts], sizes),
            np.repeat(np.maximum.reduceat(end, firsts), sizes))

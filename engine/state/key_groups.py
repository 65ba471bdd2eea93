"""Key groups: how keyed state is partitioned, with a hash that never changes.

Keyed state is split into ``max_parallelism`` key groups (default 128)::

    key_group = stable_hash(key) mod max_parallelism

and subtask ``i`` of ``p`` owns the contiguous range of key groups
``[ceil(i * max_p / p), ceil((i + 1) * max_p / p))`` — Flink's rules
(``KeyGroupRangeAssignment``), so a key group moves between subtasks whole
when the parallelism changes and a snapshot organised by key group restores at
any parallelism up to ``max_parallelism``.

``stable_hash`` is defined here, value by value, and is the same in every
process, on every machine and in every version of weir, pyarrow and DuckDB
(tests pin literal values; DuckDB's own ``hash()`` promises none of that):

- integers of any width, booleans (0/1), dates (days since the epoch),
  timestamps (µs since the epoch; ns truncated toward zero), times and
  durations (µs): the value as a 64-bit two's complement word ``v``, hashed
  as ``splitmix64(v)``. An ``int32`` 5 and an ``int64`` 5 hash alike;
- floats: the IEEE-754 bits of the value as a float64, with ``-0.0`` read
  as ``0.0`` and every NaN as the one NaN ``0x7FF8000000000000``, then
  ``splitmix64``;
- strings (UTF-8 bytes), binary, and decimals (their text, e.g. ``"1.50"``):
  MD5 of the bytes, digest bytes 8..15 read as a little-endian uint64
  (DuckDB's ``md5_number_lower``; tests check it against ``hashlib``);
- NULL of any type: ``NULL_HASH``;
- several columns ``c0, c1, ...``: ``h = h(c0)``, then
  ``h = splitmix64(h) xor h(c_i)`` for each next column (order matters);
- no columns at all (a global aggregate): 0, so every row is in key group 0.

``splitmix64(z)`` is Steele, Lea and Flood's SplitMix64 finaliser applied to
``z + 0x9E3779B97F4A7C15``, in wrapping uint64 arithmetic. Everything is
vectorised with pyarrow compute; strings are hashed by DuckDB once per
distinct value of the batch and joined back through a dictionary encoding.
"""
from __future__ import annotations

import threading

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.pandas_import import arrow_array, numpy_values, scalar

DEFAULT_MAX_PARALLELISM = 128
#: The column that carries each row's key group into a keyed operator: computed by the
#: operator itself, or at parallelism > 1 by the exchange that routed the row.
KEY_GROUP_COLUMN = "__weir_key_group"
#: The hash of NULL, whatever the column's type.
NULL_HASH = 0x5745_4952_4E55_4C4C  # "WEIRNULL"
CANONICAL_NAN_BITS = 0x7FF8_0000_0000_0000

_U64 = pa.uint64()
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_local = threading.local()


def _u(value: int) -> pa.Scalar:
    return pa.scalar(value, _U64)


# -- the mixing function ------------------------------------------------------

def splitmix64(z: pa.Array) -> pa.Array:
    """SplitMix64 over a uint64 array (wrapping arithmetic); nulls stay null."""
    z = pc.add(z, _u(0x9E3779B97F4A7C15))
    z = pc.multiply(pc.bit_wise_xor(z, pc.shift_right(z, _u(30))), _u(0xBF58476D1CE4E5B9))
    z = pc.multiply(pc.bit_wise_xor(z, pc.shift_right(z, _u(27))), _u(0x94D049BB133111EB))
    return pc.bit_wise_xor(z, pc.shift_right(z, _u(31)))


def splitmix64_numpy(z: np.ndarray) -> np.ndarray:
    """The same function over a uint64 ndarray (numpy's uint64 arithmetic wraps), into a new
    array: the sources that draw from it (datagen, nexmark) run it on every column of a batch,
    so its steps run in place, two temporaries in all."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    shifted = z >> np.uint64(30)
    z ^= shifted
    z *= np.uint64(0xBF58476D1CE4E5B9)
    np.right_shift(z, np.uint64(27), out=shifted)
    z ^= shifted
    z *= np.uint64(0x94D049BB133111EB)
    np.right_shift(z, np.uint64(31), out=shifted)
    z ^= shifted
    return z


def splitmix64_int(z: int) -> int:
    """The same function on one Python int: the reference the tests check against."""
    z = (z + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _mixed(z: pa.Array) -> pa.Array:
    """``splitmix64(z)``, in numpy where ``z`` has no NULLs (``splitmix64_numpy``: a quarter of the
    time of pyarrow's nine kernels, 0.3 -> 0.09 ms for 18K keys)."""
    if z.null_count:
        return splitmix64(z)
    return arrow_array(splitmix64_numpy(numpy_values(z)))


# -- one column -----------------------------------------------------------------

def _as_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            return column.chunk(0)
        return pa.concat_arrays(column.chunks) if column.num_chunks else pa.array([], column.type)
    return column


def _words(array: pa.Array) -> pa.Array | None:
    """The 64-bit word hashed for a fixed-width value, as uint64; None for byte strings."""
    t = array.type
    if pa.types.is_dictionary(t):
        return _words(array.dictionary_decode())
    if pa.types.is_signed_integer(t):
        return pc.cast(array, pa.int64()).view(_U64)
    if pa.types.is_unsigned_integer(t) or pa.types.is_boolean(t):
        return pc.cast(array, _U64)
    if pa.types.is_timestamp(t):
        return pc.cast(array, pa.timestamp("us", t.tz), safe=False).view(pa.int64()).view(_U64)
    if pa.types.is_date(t):
        return pc.cast(pc.cast(array, pa.date32()).view(pa.int32()), pa.int64()).view(_U64)
    if pa.types.is_time(t):
        return pc.cast(pc.cast(array, pa.time64("us"), safe=False).view(pa.int64()), _U64)
    if pa.types.is_duration(t):
        return pc.cast(array, pa.duration("us"), safe=False).view(pa.int64()).view(_U64)
    if pa.types.is_floating(t):
        x = pc.add(pc.cast(array, pa.float64()), scalar(0.0))  # -0.0 + 0.0 is +0.0
        bits = x.view(pa.int64()).view(_U64)
        return pc.if_else(pc.is_nan(x), _u(CANONICAL_NAN_BITS), bits)
    return None


def _byte_string(array: pa.Array) -> pa.Array | None:
    t = array.type
    if pa.types.is_dictionary(t):
        return _byte_string(array.dictionary_decode())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        return array
    if pa.types.is_string_view(t):
        return pc.cast(array, pa.string())
    if pa.types.is_binary_view(t):
        return pc.cast(array, pa.binary())
    if pa.types.is_fixed_size_binary(t):
        return pc.cast(array, pa.binary())
    if pa.types.is_decimal(t):
        return pc.cast(array, pa.string())
    return None


def _md5_lower(values: pa.Array) -> pa.Array:
    """MD5 digest bytes 8..15 (little-endian) of each value, computed by DuckDB."""
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect(":memory:")
    con.register("key_values", pa.table({"v": values}))
    try:
        result = con.sql("SELECT md5_number_lower(v) AS h FROM key_values").to_arrow_table()
    finally:
        con.unregister("key_values")
    return _as_array(result.column("h")).cast(_U64)


#: How many distinct byte strings each thread remembers the hash of.
MEMO_LIMIT = 1 << 17


def _hash_bytes(array: pa.Array) -> pa.Array:
    """MD5-based hashes of byte strings; NULL stays null.

    DuckDB's MD5 costs about 0.5 µs per value, so each thread remembers the
    hashes of up to ``MEMO_LIMIT`` recent distinct values (per type): values
    found there by one vectorised ``index_in`` are not hashed again, and the
    rest are hashed once per distinct value. The memo is a cache of a pure
    function — it never changes a hash — and is dropped when most rows miss it
    (keys that rarely repeat), where looking it up would only cost time.
    """
    memo = getattr(_local, "memo", None)
    if memo is None:
        memo = _local.memo = {}
    values, hashes = memo.get(array.type) or (pa.array([], array.type), pa.array([], _U64))
    positions = pc.index_in(array, value_set=values)
    known = pc.take(hashes, positions)
    unseen = pc.and_(pc.is_null(positions), pc.is_valid(array))
    misses = pc.sum(unseen).as_py() or 0
    if misses == 0:
        return known
    encoded = pc.dictionary_encode(array.filter(unseen))
    new_values = encoded.dictionary
    new_hashes = _md5_lower(new_values)
    hashed = pc.replace_with_mask(known, unseen, pc.take(new_hashes, encoded.indices))
    hits = len(array) - array.null_count - misses
    if len(values) and hits < misses:
        memo.pop(array.type)  # mostly fresh keys: the memo does not pay for itself
    elif len(values) + len(new_values) <= MEMO_LIMIT:
        memo[array.type] = (pa.concat_arrays([values, new_values]), pa.concat_arrays([hashes, new_hashes]))
    elif len(new_values) <= MEMO_LIMIT:
        memo[array.type] = (new_values, new_hashes)
    return hashed


def column_hash(column: pa.Array | pa.ChunkedArray, name: str = "?") -> pa.UInt64Array:
    """``stable_hash`` of one column: a uint64 per row, ``NULL_HASH`` for NULL."""
    array = _as_array(column)
    if pa.types.is_null(array.type):
        return pa.repeat(_u(NULL_HASH), len(array))
    words = _words(array)
    if words is not None:
        hashed = _mixed(words)
    else:
        strings = _byte_string(array)
        if strings is None:
            raise EngineError(
                f"cannot partition by key column {name!r} of type {array.type}",
                hint="key columns may be integers, floats, booleans, strings, binary, decimals, "
                "dates, times, timestamps or durations; cast the key to one of these",
            )
        hashed = _hash_bytes(strings)
    if hashed.null_count:
        hashed = pc.fill_null(hashed, _u(NULL_HASH))
    return hashed


# -- rows and key groups --------------------------------------------------------

def _column(data: pa.Table | pa.RecordBatch, name: str) -> pa.Array | pa.ChunkedArray:
    index = data.schema.get_field_index(name)
    if index < 0:
        raise EngineError(
            f"key column {name!r} is not in the input",
            hint=f"input columns: {data.schema.names}",
        )
    return data.column(index)


def stable_hash(data: pa.Table | pa.RecordBatch, columns: list[str]) -> pa.UInt64Array:
    """The stable hash of each row's values in ``columns`` (see the module docstring)."""
    if not columns:
        return pa.repeat(_u(0), data.num_rows)
    h = column_hash(_column(data, columns[0]), columns[0])
    for name in columns[1:]:
        h = pc.bit_wise_xor(_mixed(h), column_hash(_column(data, name), name))
    return h


def _check_max_parallelism(max_parallelism: int) -> None:
    if not 1 <= max_parallelism <= 32768:
        raise EngineError(
            f"max parallelism {max_parallelism} is out of range",
            hint="use a value from 1 to 32768 (the default is 128)",
        )


def key_groups(
    data: pa.Table | pa.RecordBatch, columns: list[str], max_parallelism: int = DEFAULT_MAX_PARALLELISM
) -> pa.Int32Array:
    """The key group of each row: ``stable_hash(row) mod max_parallelism``."""
    _check_max_parallelism(max_parallelism)
    if not columns:
        return pa.repeat(pa.scalar(0, pa.int32()), data.num_rows)
    h = stable_hash(data, columns)
    if max_parallelism & (max_parallelism - 1) == 0:
        group = pc.bit_wise_and(h, _u(max_parallelism - 1))
    else:
        group = pc.subtract(h, pc.multiply(pc.divide(h, _u(max_parallelism)), _u(max_parallelism)))
    return pc.cast(group, pa.int32())


def range_for_subtask(subtask_index: int, parallelism: int, max_parallelism: int) -> range:
    """The key groups subtask ``subtask_index`` of ``parallelism`` owns, as a range."""
    _check_parallelism(parallelism, max_parallelism)
    if not 0 <= subtask_index < parallelism:
        raise EngineError(f"subtask {subtask_index} does not exist at parallelism {parallelism}")
    start = -(-subtask_index * max_parallelism // parallelism)
    end = -(-(subtask_index + 1) * max_parallelism // parallelism)
    return range(start, end)


def subtask_for_key_group(key_group: int, parallelism: int, max_parallelism: int) -> int:
    """The subtask of ``parallelism`` that owns ``key_group``."""
    _check_parallelism(parallelism, max_parallelism)
    if not 0 <= key_group < max_parallelism:
        raise EngineError(f"key group {key_group} is outside [0, {max_parallelism})")
    return key_group * parallelism // max_parallelism


def _check_parallelism(parallelism: int, max_parallelism: int) -> None:
    _check_max_parallelism(max_parallelism)
    if not 1 <= parallelism <= max_parallelism:
        raise EngineError(
            f"parallelism {parallelism} does not fit max parallelism {max_parallelism}",
            hint="parallelism must be from 1 to the max parallelism: keyed state has only "
            f"{max_parallelism} key groups to share out",
        )


def subtasks(
    data: pa.Table | pa.RecordBatch, columns: list[str], parallelism: int,
    max_parallelism: int = DEFAULT_MAX_PARALLELISM,
) -> pa.Int32Array:
    """The target subtask of each row (``key_group * parallelism // max_parallelism``)."""
    _check_parallelism(parallelism, max_parallelism)
    groups = pc.cast(key_groups(data, columns, max_parallelism), pa.int64())
    return pc.cast(pc.divide(pc.multiply(groups, parallelism), max_parallelism), pa.int32())


#: Above this many targets, one stable sort beats a filter pass per target.
_SORT_ABOVE_TARGETS = 8


def partition(
    batch: pa.RecordBatch, columns: list[str], parallelism: int,
    max_parallelism: int = DEFAULT_MAX_PARALLELISM,
) -> list[pa.RecordBatch]:
    """``batch`` split by key into one batch per target subtask, rows in their input order.

    Every target gets a batch, possibly empty. A row goes to the subtask that
    owns its key group.
    """
    _check_parallelism(parallelism, max_parallelism)
    if parallelism == 1:
        return [batch]
    targets = subtasks(batch, columns, parallelism, max_parallelism)
    if parallelism <= _SORT_ABOVE_TARGETS:
        return [batch.filter(pc.equal(targets, i)) for i in range(parallelism)]
    order = pc.sort_indices(targets)  # stable: rows keep their order within a target
    ordered = batch.take(order)
    counts = pc.value_counts(targets)
    sizes = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    out, offset = [], 0
    for i in range(parallelism):
        n = sizes.get(i, 0)
        out.append(ordered.slice(offset, n))
        offset += n
    return out

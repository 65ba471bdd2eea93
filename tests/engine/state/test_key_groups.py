"""Key groups: the stable hash pinned value by value, key-group ranges, partitioning."""
from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import math
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.errors import EngineError
from weir.engine.state import key_groups as kg_module
from weir.engine.state.key_groups import (
    NULL_HASH,
    key_groups,
    partition,
    range_for_subtask,
    splitmix64_int,
    stable_hash,
    subtask_for_key_group,
)

MASK = 2**64 - 1


def hashes(array: pa.Array) -> list[int]:
    return stable_hash(pa.table({"k": array}), ["k"]).to_pylist()


# -- a reference written from the definition, one value at a time ----------------

def ref_int(v: int) -> int:
    return splitmix64_int(v & MASK)


def ref_float(x: float) -> int:
    if math.isnan(x):
        bits = 0x7FF8000000000000
    else:
        (bits,) = struct.unpack("<Q", struct.pack("<d", x + 0.0))
    return splitmix64_int(bits)


def ref_bytes(b: bytes) -> int:
    return int.from_bytes(hashlib.md5(b).digest()[8:16], "little")


def ref_row(*column_hashes: int) -> int:
    h = column_hashes[0]
    for c in column_hashes[1:]:
        h = splitmix64_int(h) ^ c
    return h


def test_splitmix64_matches_the_published_reference_outputs():
    # SplitMix64 seeded with 0 yields these first outputs (Vigna's splitmix64.c):
    # state advances by the golden gamma before each output.
    state, outputs = 0, []
    for _ in range(3):
        outputs.append(splitmix64_int(state))
        state = (state + 0x9E3779B97F4A7C15) & MASK
    assert outputs == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]


# -- pinned values: these must never change --------------------------------------

def test_pinned_integers():
    assert hashes(pa.array([0, 1, -1, 42, 2**63 - 1], pa.int64())) == [
        16294208416658607535, 10451216379200822465, 16490336266968443936,
        13679457532755275413, 3055647633038352039,
    ]


def test_pinned_strings_and_binary():
    assert hashes(pa.array(["", "auction", "é", "Google"])) == [
        9098107892288553193, 17939173357257171082, 8054489590243458038, 10672722192227506535,
    ]
    assert hashes(pa.array([b"\x00\xff"])) == [26625818650007162]


def test_pinned_floats_booleans_times_decimals_and_null():
    assert hashes(pa.array([1.5, 0.0, float("nan")])) == [
        15481881892811333770, 16294208416658607535, 14351126860892846918,
    ]
    assert hashes(pa.array([True, False])) == [10451216379200822465, 16294208416658607535]
    assert hashes(pa.array([1_700_000_000_000_000], pa.timestamp("us"))) == [13238526803727093263]
    assert hashes(pa.array([19000], pa.date32())) == [15167151074275903473]
    assert hashes(pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2))) == [1775101664740673330]
    assert hashes(pa.array([None], pa.int64())) == [6288513072543124556] == [NULL_HASH]


def test_pinned_rows_of_two_columns_and_their_key_groups():
    table = pa.table({"a": pa.array([1, 2], pa.int64()), "b": ["a", "b"]})
    assert stable_hash(table, ["a", "b"]).to_pylist() == [4568862658687705647, 16951405212534002574]
    assert key_groups(table, ["a", "b"], 128).to_pylist() == [47, 14]
    ints = pa.table({"k": pa.array([0, 1, -1, 42, 1000], pa.int64())})
    assert key_groups(ints, ["k"], 128).to_pylist() == [47, 65, 32, 21, 72]
    channels = pa.table({"k": ["Google", "Apple", "Baidu", "Facebook"]})
    assert key_groups(channels, ["k"], 128).to_pylist() == [103, 81, 33, 41]


# -- the definition, checked against the reference ------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40))
def test_integers_follow_the_definition(values):
    assert hashes(pa.array(values, pa.int64())) == [ref_int(v) for v in values]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=40))
def test_strings_follow_the_definition(values):
    expected = [NULL_HASH if v is None else ref_bytes(v.encode()) for v in values]
    assert hashes(pa.array(values, pa.string())) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40))
def test_floats_follow_the_definition(values):
    assert hashes(pa.array(values, pa.float64())) == [ref_float(x) for x in values]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 5)),
                          st.one_of(st.none(), st.sampled_from(["x", "y", ""])),
                          st.booleans()), max_size=30))
def test_rows_combine_columns_in_order(rows):
    table = pa.table({
        "a": pa.array([r[0] for r in rows], pa.int64()),
        "b": pa.array([r[1] for r in rows], pa.string()),
        "c": pa.array([r[2] for r in rows], pa.bool_()),
    })
    expected = [
        ref_row(NULL_HASH if a is None else ref_int(a),
                NULL_HASH if b is None else ref_bytes(b.encode()), ref_int(int(c)))
        for a, b, c in rows
    ]
    assert stable_hash(table, ["a", "b", "c"]).to_pylist() == expected


def test_column_order_matters():
    table = pa.table({"a": pa.array([1], pa.int64()), "b": pa.array([2], pa.int64())})
    assert stable_hash(table, ["a", "b"]) != stable_hash(table, ["b", "a"])


# -- equal values hash alike whatever the physical type --------------------------

def test_integer_widths_and_signedness_hash_alike():
    values = [0, 5, 100, None]
    expected = hashes(pa.array(values, pa.int64()))
    for t in (pa.int8(), pa.int16(), pa.int32(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()):
        assert hashes(pa.array(values, t)) == expected, t
    assert hashes(pa.array([-3], pa.int8())) == hashes(pa.array([-3], pa.int64()))


def test_string_encodings_hash_alike():
    values = ["a", "bé", None, "a"]
    expected = hashes(pa.array(values, pa.string()))
    assert hashes(pa.array(values, pa.large_string())) == expected
    assert hashes(pa.array(values, pa.string_view())) == expected
    assert hashes(pa.array(values).dictionary_encode()) == expected
    assert hashes(pa.array([v.encode() if v else None for v in values], pa.binary())) == expected


def test_the_memo_of_string_hashes_never_changes_a_hash(monkeypatch):
    monkeypatch.setattr(kg_module, "MEMO_LIMIT", 5)
    monkeypatch.setattr(kg_module._local, "memo", {}, raising=False)
    remembered = []
    for start in (0, 3, 0, 0, 10, 2, 0, 40, 41, 0):
        values = [f"v{i}" for i in range(start, start + 4)] + [None, f"v{start}"]
        assert hashes(pa.array(values)) == [
            NULL_HASH if v is None else ref_bytes(v.encode()) for v in values]
        memo = kg_module._local.memo.get(pa.string())
        if memo is not None:
            assert len(memo[0]) <= 5 and len(memo[0]) == len(memo[1])
            assert memo[1].to_pylist() == [ref_bytes(v.encode()) for v in memo[0].to_pylist()]
        remembered.append(memo is not None)
    assert any(remembered) and not all(remembered)  # the memo was used, and dropped


def test_floats_normalise_signed_zero_and_nan():
    nan2 = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    got = hashes(pa.array([0.0, -0.0, float("nan"), nan2, -float("nan")]))
    assert got[0] == got[1] and got[2] == got[3] == got[4]
    assert hashes(pa.array([1.5], pa.float32())) == hashes(pa.array([1.5], pa.float64()))


def test_times_hash_their_value_in_microseconds_and_days():
    instant = dt.datetime(2024, 1, 2, 3, 4, 5, 678000)
    expected = hashes(pa.array([instant], pa.timestamp("us")))
    for unit in ("ms", "ns"):
        assert hashes(pa.array([instant], pa.timestamp(unit))) == expected
    assert hashes(pa.array([instant], pa.timestamp("us", "UTC"))) == expected
    assert hashes(pa.array([1_999], pa.timestamp("ns"))) == hashes(pa.array([1], pa.timestamp("us")))
    assert expected == [ref_int(1_704_164_645_678_000)]
    day = dt.date(2022, 1, 8)
    assert hashes(pa.array([day], pa.date64())) == hashes(pa.array([day], pa.date32())) == [
        ref_int((day - dt.date(1970, 1, 1)).days)]


def test_null_hashes_alike_in_every_type():
    for t in (pa.int64(), pa.string(), pa.float64(), pa.timestamp("us"), pa.null()):
        assert hashes(pa.array([None, None], t)) == [NULL_HASH, NULL_HASH]


def test_a_chunked_table_and_a_batch_hash_alike():
    table = pa.concat_tables([
        pa.table({"a": pa.array([1, 2], pa.int64()), "s": ["x", None]}),
        pa.table({"a": pa.array([3], pa.int64()), "s": ["x"]}),
    ])
    batch = table.combine_chunks().to_batches()[0]
    assert stable_hash(table, ["a", "s"]) == stable_hash(batch, ["a", "s"])


def test_unsupported_types_and_missing_columns_are_reported():
    table = pa.table({"l": pa.array([[1]], pa.list_(pa.int64()))})
    with pytest.raises(EngineError, match="cannot partition by key column 'l'"):
        stable_hash(table, ["l"])
    with pytest.raises(EngineError, match="'nope' is not in the input"):
        stable_hash(table, ["nope"])


# -- key groups -------------------------------------------------------------------

def test_key_groups_are_the_hash_modulo_max_parallelism():
    table = pa.table({"k": pa.array(range(-500, 500), pa.int64())})
    h = stable_hash(table, ["k"]).to_pylist()
    for max_p in (1, 7, 100, 128, 32768):
        groups = key_groups(table, ["k"], max_p)
        assert groups.type == pa.int32()
        assert groups.to_pylist() == [x % max_p for x in h]


def test_no_key_columns_put_every_row_in_key_group_0():
    table = pa.table({"x": [1, 2, 3]})
    assert key_groups(table, [], 128).to_pylist() == [0, 0, 0]
    assert stable_hash(table, []).to_pylist() == [0, 0, 0]


def test_keys_spread_over_all_key_groups():
    table = pa.table({"k": pa.array(range(10_000), pa.int64())})
    counts = pa.compute.value_counts(key_groups(table, ["k"], 128))
    assert len(counts) == 128
    assert min(counts.field("counts").to_pylist()) > 40  # 78 expected per group


@pytest.mark.parametrize("max_p", [1, 2, 7, 128, 1000])
def test_subtask_ranges_tile_the_key_groups_and_agree_with_the_owner(max_p):
    for p in sorted({1, 2, 3, 5, max_p // 2 or 1, max_p} & set(range(1, max_p + 1))):
        ranges = [range_for_subtask(i, p, max_p) for i in range(p)]
        assert [g for r in ranges for g in r] == list(range(max_p))
        for i, r in enumerate(ranges):
            assert all(subtask_for_key_group(g, p, max_p) == i for g in r)


def test_subtask_ranges_follow_flink():
    assert [range_for_subtask(i, 3, 128) for i in range(3)] == [
        range(0, 43), range(43, 86), range(86, 128)]
    assert [range_for_subtask(i, 4, 10) for i in range(4)] == [
        range(0, 3), range(3, 5), range(5, 8), range(8, 10)]


def test_bad_parallelism_is_reported():
    with pytest.raises(EngineError, match="parallelism 200 does not fit max parallelism 128"):
        range_for_subtask(0, 200, 128)
    with pytest.raises(EngineError, match="subtask 3 does not exist"):
        range_for_subtask(3, 3, 128)
    with pytest.raises(EngineError, match="key group 128 is outside"):
        subtask_for_key_group(128, 2, 128)
    with pytest.raises(EngineError, match="max parallelism 0"):
        key_groups(pa.table({"k": [1]}), ["k"], 0)


# -- partition ----------------------------------------------------------------------

def _keyed_batch(keys: list[int | None]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "k": pa.array(keys, pa.int64()),
        "s": pa.array([None if k is None else f"s{k % 3}" for k in keys]),
        "row": pa.array(range(len(keys)), pa.int64()),
    })


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=200),
       st.sampled_from([1, 2, 3, 8, 9, 16]), st.sampled_from([16, 128, 100]))
def test_partition_sends_each_row_to_its_key_groups_owner_in_order(keys, p, max_p):
    batch = _keyed_batch(keys)
    parts = partition(batch, ["k", "s"], p, max_p)
    assert len(parts) == p
    groups = key_groups(batch, ["k", "s"], max_p).to_pylist()
    for i, part in enumerate(parts):
        assert part.schema == batch.schema
        rows = part.column("row").to_pylist()
        assert rows == sorted(rows)  # input order kept
        assert all(subtask_for_key_group(groups[r], p, max_p) == i for r in rows)
    assert sorted(r for part in parts for r in part.column("row").to_pylist()) == list(range(len(keys)))


def test_partition_by_filter_and_by_sort_agree(monkeypatch):
    batch = _keyed_batch(list(range(300)))
    by_filter = partition(batch, ["k"], 6, 128)
    monkeypatch.setattr(kg_module, "_SORT_ABOVE_TARGETS", 0)
    assert partition(batch, ["k"], 6, 128) == by_filter


def test_partition_without_keys_sends_everything_to_subtask_0():
    batch = _keyed_batch([1, 2, 3])
    parts = partition(batch, [], 4)
    assert parts[0] == batch and [p.num_rows for p in parts[1:]] == [0, 0, 0]

"""Islands numbered in Arrow equal SQL's gaps and islands (``lag`` then a running ``sum`` over
``PARTITION BY`` keys), NULL and NaN keys grouped as PARTITION BY groups them; the order rows are
sorted in for them is (keys, time), whether an integer key is packed with the time or not; and
intervals merged in Arrow where they touch equal SQL's gaps and islands over intervals."""
from __future__ import annotations

import math

import duckdb
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from weir.engine.operators.islands import comparable, island_numbers, key_time_order, merged_intervals

KEYS = st.one_of(st.none(), st.integers(0, 3))
NAMES = st.one_of(st.none(), st.sampled_from(["a", "b", "ß"]))
PRICES = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, math.nan]))


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(KEYS, NAMES, PRICES, st.integers(0, 50)), max_size=60), gap=st.integers(1, 10))
def test_islands_equal_sql_gaps_and_islands(rows, gap):
    table = pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "name": pa.array([r[1] for r in rows], pa.string()),
                      "price": pa.array([r[2] for r in rows], pa.float64()), "ts": pa.array([r[3] for r in rows], pa.int64())})
    con = duckdb.connect()
    con.register("t", table)
    ordered = con.sql("SELECT *, row_number() OVER () AS n FROM (SELECT * FROM t ORDER BY k, name, price, ts)").to_arrow_table()
    con.register("o", ordered)
    expected = con.sql(f"""
        SELECT n, sum(new) OVER (PARTITION BY k, name, price ORDER BY ts, n ROWS UNBOUNDED PRECEDING) AS island,
               k, name, price
        FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k, name, price ORDER BY ts, n) <= {gap}
                             THEN 0 ELSE 1 END AS new FROM o)
        ORDER BY n""").fetchall()
    keys = [ordered.column(c).combine_chunks() for c in ("k", "name", "price")]
    got = island_numbers(keys, ordered.column("ts").combine_chunks(), gap).to_pylist()
    # the same partition of the rows: rows share an island in one exactly when they do in the other
    sql_islands = [(k, name, None if price is None else ("nan" if math.isnan(price) else price), island)
                   for _, island, k, name, price in expected]
    assert len(got) == len(rows)
    for i in range(len(rows)):
        for j in range(i + 1, min(i + 4, len(rows))):
            assert (got[i] == got[j]) == (sql_islands[i] == sql_islands[j])


def test_keys_arrow_cannot_compare_are_left_to_sql():
    assert comparable(pa.int64()) and comparable(pa.string()) and comparable(pa.dictionary(pa.int32(), pa.string()))
    assert not comparable(pa.list_(pa.int64())) and not comparable(pa.struct([("a", pa.int64())]))


INTEGER_KEYS = st.sampled_from([(pa.int64(), -2**62, 2**62), (pa.int32(), -5, 5), (pa.uint64(), 0, 2**64 - 1),
                                (pa.uint32(), 0, 2**32 - 1), (pa.int64(), 10**6, 10**6 + 3)])


@settings(max_examples=80, deadline=None)
@given(data=st.data(), kind=INTEGER_KEYS, nulls=st.booleans())
def test_rows_sort_by_key_then_time_packed_or_not(data, kind, nulls):
    arrow_type, low, high = kind
    keys = st.one_of(st.none(), st.integers(low, high)) if nulls else st.integers(low, high)
    rows = data.draw(st.lists(st.tuples(keys, st.integers(-2**40, 2**40) | st.integers(0, 9)), max_size=50))
    table = pa.table({"k": pa.array([k for k, _ in rows], arrow_type), "ts": pa.array([t for _, t in rows], pa.int64())})
    got = table.take(key_time_order(table, ["k"], "ts"))
    expected = sorted(rows, key=lambda r: (r[0] is None, r[0] or 0, r[1]))
    assert list(zip(got.column("k").to_pylist(), got.column("ts").to_pylist())) == expected


def test_keys_and_times_that_leave_no_bits_for_the_position_sort_by_both():
    # key span 2**29 and time span 2**31: 62 bits packed, none left for the rows' positions
    table = pa.table({"k": pa.array([2**29, 0, 2**29, 0], pa.int64()), "ts": pa.array([0, 2**31, 5, 1], pa.int64())})
    got = table.take(key_time_order(table, ["k"], "ts"))
    assert list(zip(got.column("k").to_pylist(), got.column("ts").to_pylist())) == [
        (0, 1), (0, 2**31), (2**29, 0), (2**29, 5)]


def test_two_keys_sort_by_both_then_time():
    table = pa.table({"a": ["y", "x", None, "x"], "b": [1, 2, 1, 1], "ts": [5, 4, 3, 9]})
    got = table.take(key_time_order(table, ["a", "b"], "ts"))
    assert got.to_pylist() == [{"a": "x", "b": 1, "ts": 9}, {"a": "x", "b": 2, "ts": 4},
                               {"a": "y", "b": 1, "ts": 5}, {"a": None, "b": 1, "ts": 3}]


@settings(max_examples=80, deadline=None)
@given(intervals=st.lists(st.tuples(KEYS, st.integers(-20, 20), st.integers(0, 6)), min_size=1, max_size=40))
def test_intervals_merge_as_sql_merges_them(intervals):
    table = pa.table({"k": pa.array([k for k, _, _ in intervals], pa.int64()),
                      "s": pa.array([s for _, s, _ in intervals], pa.int64()),
                      "e": pa.array([s + length for _, s, length in intervals], pa.int64())})
    table = table.take(key_time_order(table, ["k"], "s"))
    con = duckdb.connect()
    con.register("t", table.append_column("n", pa.array(range(len(table)), pa.int64())))
    expected = con.sql("""
        SELECT n, min(s) OVER (PARTITION BY k, m) AS merged_start, max(e) OVER (PARTITION BY k, m) AS merged_end, k, m
        FROM (SELECT *, sum(new) OVER (PARTITION BY k ORDER BY s, n ROWS UNBOUNDED PRECEDING) AS m
              FROM (SELECT *, CASE WHEN s <= max(e) OVER (PARTITION BY k ORDER BY s, n ROWS BETWEEN UNBOUNDED
                                   PRECEDING AND 1 PRECEDING) THEN 0 ELSE 1 END AS new FROM t))
        ORDER BY n""").fetchall()
    numbers, starts, ends = merged_intervals([table.column("k").combine_chunks()], table.column("s").combine_chunks(),
                                             table.column("e").combine_chunks())
    assert [(int(a), int(b)) for a, b in zip(starts, ends)] == [(start, end) for _, start, end, _, _ in expected]
    for i in range(len(table)):
        for j in range(i + 1, len(table)):
            assert (numbers[i] == numbers[j]) == (expected[i][3:] == expected[j][3:])


def test_times_too_far_apart_for_one_int64_are_left_to_sql():
    keys = [pa.array(range(8), pa.int64())]
    assert merged_intervals(keys, pa.array([0] * 8, pa.int64()), pa.array([2**60] * 8, pa.int64())) is None

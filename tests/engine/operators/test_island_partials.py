"""Partials per island made in numpy equal DuckDB's GROUP BY of the same partial SQL, values and
types (COUNT of rows and of values, with FILTER; MIN and MAX of integers, NULL for an island
without a value); other partials are left to SQL."""
from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from weir.engine.operators.accumulators import Accumulator, AggregateCall
from weir.engine.operators.island_partials import island_partials

CALLS = [
    AggregateCall("n", "count"),
    AggregateCall("n_price", "count", "price"),
    AggregateCall("n_big", "count", None, filter="big"),
    AggregateCall("low", "min", "price"),
    AggregateCall("high", "max", "price", filter="big"),
    AggregateCall("small", "min", "small"),
    AggregateCall("top", "max", "small", filter="big"),
]
INTEGER_TYPES = st.sampled_from([pa.int8(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32()])


def prepared(accumulators: list[Accumulator], islands: list[int], prices: list, smalls: list, bigs: list) -> pa.Table:
    """Batch rows as the session window prepares them: each accumulator's argument and filter columns."""
    columns = {"__island": pa.array(islands, pa.int64())}
    for acc, call in zip(accumulators, CALLS):
        if acc.argument_column:
            columns[acc.argument_column] = prices if call.argument == "price" else smalls
        if acc.filter_column:
            columns[acc.filter_column] = bigs
    return pa.table(columns)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), price_type=INTEGER_TYPES, small_type=INTEGER_TYPES)
def test_partials_per_island_equal_duckdbs_group_by(data, price_type, small_type):
    sizes = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=12))
    n = sum(sizes)
    islands = [i + 1 for i, size in enumerate(sizes) for _ in range(size)]
    def values(kind: pa.DataType) -> list:
        low, high = (0, 255) if pa.types.is_unsigned_integer(kind) else (-128, 127)
        return data.draw(st.lists(st.one_of(st.none(), st.integers(low, high)), min_size=n, max_size=n))

    prices, smalls = pa.array(values(price_type), price_type), pa.array(values(small_type), small_type)
    bigs = pa.array(data.draw(st.lists(st.one_of(st.none(), st.booleans()), min_size=n, max_size=n)), pa.bool_())
    accumulators = [Accumulator(call, i) for i, call in enumerate(CALLS)]
    rows = prepared(accumulators, islands, prices, smalls, bigs)
    firsts = np.cumsum([0, *sizes[:-1]])
    got = island_partials(rows, firsts, np.array(sizes), accumulators)
    columns = [c for acc in accumulators for c in acc.columns]
    con = duckdb.connect()
    con.register("batch_rows", rows)
    expected = con.sql(f"SELECT {', '.join(f'{c.partial_sql} AS {c.name}' for c in columns)} "
                       f"FROM batch_rows GROUP BY __island ORDER BY __island").to_arrow_table()
    assert got is not None
    for column, array in zip(columns, got):
        assert array.type == expected.schema.field(column.name).type
        assert array.to_pylist() == expected.column(column.name).to_pylist()


def test_sums_floats_and_64_bit_unsigned_extremes_are_left_to_sql():
    def partials(call: AggregateCall, values: pa.Array):
        acc = Accumulator(call, 0)
        return island_partials(pa.table({acc.argument_column: values}), np.array([0]), np.array([2]), [acc])

    assert partials(AggregateCall("total", "sum", "price"), pa.array([1, 2])) is None
    assert partials(AggregateCall("high", "max", "ratio"), pa.array([1.5, -0.0])) is None
    assert partials(AggregateCall("high", "max", "id"), pa.array([1, 2], pa.uint64())) is None
    assert partials(AggregateCall("n", "count", "ratio"), pa.array([1.5, None])) == [pa.array([1], pa.int64())]

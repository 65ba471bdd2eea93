"""Calc driven directly: projection, filter, types and counters."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.calc import Calc


def make_calc(projection, schema, filter=None) -> Calc:
    op = Calc({"projection": projection, "filter": filter}, OperatorContext("calc", schema))
    op.open()
    return op


BIDS = pa.record_batch({
    "auction": pa.array([1, 2, 3, None], pa.int64()),
    "price": pa.array([100, 250, None, 40], pa.int32()),
    "bidder name": ["ann", "bob", "cy", None],
    "date_time": pa.array([0, 1_500_000, 3_000_000, None], pa.timestamp("us")),
})


def test_projection_and_filter_run_as_duckdb_sql():
    schema = pa.schema([("auction", pa.int64()), ("euro", pa.float64()), ("who", pa.string()),
                        ("date_time", pa.timestamp("us"))])
    op = make_calc(
        [["auction", "auction"], ["euro", "price * 0.9"], ["who", 'upper("bidder name")'],
         ["date_time", "date_time"]],
        schema,
        filter="price > 50",
    )
    [out] = op.process_batch(BIDS)
    assert out.schema == schema
    assert out.to_pylist() == [
        {"auction": 1, "euro": 90.0, "who": "ANN", "date_time": dt.datetime(1970, 1, 1)},
        {"auction": 2, "euro": 225.0, "who": "BOB",
         "date_time": dt.datetime(1970, 1, 1, 0, 0, 1, 500_000)},
    ]
    assert op.ctx.metrics == {"rows_in": 4, "rows_out": 2}


def test_results_are_cast_to_the_output_schema():
    # DuckDB computes INTEGER and DECIMAL; the planner asked for int64, float64 and large_string.
    schema = pa.schema([("price", pa.int64()), ("half", pa.float64()), ("label", pa.large_string()),
                        ("day", pa.date32())])
    op = make_calc([["price", "price"], ["half", "price / 2"], ["label", "'a' || auction"],
                    ["day", "CAST(date_time AS DATE)"]], schema)
    [out] = op.process_batch(BIDS)
    assert out.schema == schema
    assert out.column("price").to_pylist() == [100, 250, None, 40]
    assert out.column("label").to_pylist() == ["a1", "a2", "a3", None]


def test_a_null_filter_result_drops_the_row():
    schema = pa.schema([("auction", pa.int64())])
    [out] = make_calc([["auction", "auction"]], schema, filter="price < 200").process_batch(BIDS)
    assert out.column("auction").to_pylist() == [1, None]


def test_an_empty_result_produces_no_batch():
    schema = pa.schema([("auction", pa.int64())])
    op = make_calc([["auction", "auction"]], schema, filter="price > 1000")
    assert op.process_batch(BIDS) == []
    assert op.process_batch(BIDS.slice(0, 0)) == []
    assert op.ctx.metrics == {"rows_in": 4, "rows_out": 0}


def test_output_names_are_quoted():
    schema = pa.schema([("select", pa.int64()), ('odd "name"', pa.string())])
    [out] = make_calc([["select", "auction"], ['odd "name"', '"bidder name"']], schema).process_batch(BIDS)
    assert out.schema == schema and out.num_rows == 4


def test_watermarks_snapshots_and_finish_are_no_ops():
    op = make_calc([["auction", "auction"]], pa.schema([("auction", pa.int64())]))
    assert op.process_watermark(10) == [] and op.finish() == []
    assert op.snapshot() is None
    op.close()


def test_a_bad_expression_names_the_operator():
    op = make_calc([["x", "no_such_column + 1"]], pa.schema([("x", pa.int64())]))
    with pytest.raises(EngineError, match="no_such_column") as info:
        op.process_batch(BIDS)
    assert info.value.operator_id == "calc"


def test_a_result_that_does_not_fit_the_schema_is_reported():
    op = make_calc([["x", "'abc'"]], pa.schema([("x", pa.int64())]))
    with pytest.raises(EngineError, match="output schema"):
        op.process_batch(BIDS)


def test_an_empty_projection_is_refused():
    with pytest.raises(EngineError, match="projection"):
        make_calc([], pa.schema([]))


def test_picking_columns_takes_them_from_the_batch_as_duckdb_would():
    """A projection of plain column references (a join input's pruning, a rename) is taken by
    Arrow; its result is the one the DuckDB statement gives, arrival watermarks passed on."""
    from weir.engine.watermarks import ARRIVAL_WATERMARK
    schema = pa.schema([("when", pa.timestamp("us")), ("who", pa.string()), ("p", pa.int64()),
                        ("again", pa.int64())])
    projection = [["when", '"date_time"'], ["who", '"bidder name"'], ["p", '"price"'], ["again", '"price"']]
    batch = BIDS.append_column(ARRIVAL_WATERMARK, pa.array([5, 6, 7, 8], pa.int64()))
    picked = make_calc(projection, schema)
    assert picked._passed == ["date_time", "bidder name", "price", "price"] and picked._computed_query is None
    assert make_calc([*projection[:3], ["again", '"price" + 0']], schema)._computed_query is not None
    whole = make_calc(projection, schema, filter="true")  # the DuckDB statement
    assert whole._passed is None
    [fast] = picked.process_batch(batch)
    [slow] = whole.process_batch(batch)
    assert fast.schema == slow.schema == schema.append(pa.field(ARRIVAL_WATERMARK, pa.int64()))
    assert fast.to_pylist() == slow.to_pylist()
    assert fast.column("again").to_pylist() == [100, 250, None, 40]
    assert make_calc(projection, schema, filter="price > 50")._passed is None


def test_a_projection_without_a_filter_computes_only_its_expressions_and_passes_the_rest():
    """Computed items go through DuckDB, passed columns come from the batch: the same result as
    the whole statement (a filter that keeps every row forces it)."""
    from weir.engine.watermarks import ARRIVAL_WATERMARK
    schema = pa.schema([("who", pa.string()), ("euro", pa.float64()), ("a", pa.int64()), ("same", pa.string()),
                        ("when", pa.timestamp("us"))])
    projection = [["who", '"bidder name"'], ["euro", "price * 0.9"], ["a", '"auction"'],
                  ["same", 'upper("bidder name")'], ["when", '"date_time"']]
    batch = BIDS.append_column(ARRIVAL_WATERMARK, pa.array([5, 6, 7, 8], pa.int64()))
    split = make_calc(projection, schema)
    assert split._passed == ["bidder name", None, "auction", None, "date_time"]
    whole = make_calc(projection, schema, filter="true")
    assert whole._passed is None
    for rows in (batch, BIDS):
        [fast] = split.process_batch(rows)
        [slow] = whole.process_batch(rows)
        assert fast.schema == slow.schema and fast.to_pylist() == slow.to_pylist()
    assert fast.column("same").to_pylist() == ["ANN", "BOB", "CY", None]


def test_a_projection_that_makes_rows_stays_one_statement():
    """unnest (a HOP window's assignment) gives a row per element: its passed columns must
    repeat with it, so the whole projection is DuckDB's."""
    schema = pa.schema([("auction", pa.int64()), ("slot", pa.int64())])
    projection = [["auction", '"auction"'], ["slot", "unnest(range(0, 2))"]]
    op = make_calc(projection, schema)
    assert op._passed is None
    [out] = op.process_batch(BIDS)
    assert out.to_pylist() == [{"auction": a, "slot": s} for a in (1, 2, 3, None) for s in (0, 1)]


@pytest.mark.parametrize("unit", ["s", "ms", "us"])
@pytest.mark.parametrize("micros", [1000, 2_000_000, 5])
def test_a_time_shifted_by_a_constant_is_what_duckdb_computes(unit, micros):
    """``"t" - INTERVAL n MICROSECOND`` (a cascaded window's time) is shifted in Arrow when the
    column's unit can hold the shift, by DuckDB otherwise: the same rows either way."""
    values = [-86_400_000_000, 0, None, 1_700_000_000_000_000, 1_999_000, 9_223_372_022_399_999_000]
    factor = {"s": 1_000_000, "ms": 1_000, "us": 1}[unit]
    batch = pa.record_batch({"t": pa.array([v if v is None else v // factor for v in values], pa.timestamp(unit)),
                             "n": pa.array(range(len(values)), pa.int64())})
    schema = pa.schema([("n", pa.int64()), ("earlier", pa.timestamp("us")), ("later", pa.timestamp("us"))])
    projection = [["n", '"n"'], ["earlier", f'"t" - INTERVAL {micros} MICROSECOND'],
                  ["later", f'"t" + INTERVAL {micros} MICROSECOND']]
    shifted, evaluated = make_calc(projection, schema), make_calc(projection, schema)
    evaluated._passed = None  # the whole projection in DuckDB
    assert shifted._shifts[1] == ("t", -micros) and shifted._shifts[2] == ("t", micros)
    assert shifted.process_batch(batch) == evaluated.process_batch(batch)


def test_a_time_shift_that_overflows_fails_as_duckdb_fails():
    batch = pa.record_batch({"t": pa.array([9_223_372_036_854_775_000], pa.timestamp("us"))})
    op = make_calc([["t", '"t" + INTERVAL 1000 MICROSECOND']], pa.schema([("t", pa.timestamp("us"))]))
    with pytest.raises(EngineError, match="DuckDB failed: .*timestamp range"):
        op.process_batch(batch)

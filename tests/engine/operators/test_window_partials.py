"""Plain COUNT, SUM, MIN and MAX of a window aggregate computed in Arrow (``window_partials``,
``window_groups``) against the same operator computing them in DuckDB (``_partials = None``):
the same rows in the same order, whatever the batches, watermarks, late rows, restores and
the bound that moves held partials into DuckDB."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine.errors import EngineError
from weir.engine.operators import duckdb_sql
from weir.engine.operators.window_groups import group
from window_harness import SECOND, drive_to_end, make_window_op, to_rows

WINDOWS = {
    "tumble": {"kind": "tumble", "time_column": "ts", "size": 4 * SECOND, "offset": SECOND},
    "hop": {"kind": "hop", "time_column": "ts", "size": 6 * SECOND, "slide": 2 * SECOND},
    "cumulate": {"kind": "cumulate", "time_column": "ts", "size": 6 * SECOND, "step": 2 * SECOND, "offset": SECOND},
}
SCHEMA = pa.schema([
    ("k", pa.int64()), ("window_start", pa.timestamp("us")), ("window_end", pa.timestamp("us")),
    ("window_time", pa.timestamp("us")), ("n", pa.int64()), ("n_v", pa.int64()), ("total", pa.int64()),
    ("small_total", pa.int32()), ("low", pa.int64()), ("high", pa.int32()), ("latest", pa.timestamp("us")),
])


def config(window: str, key_type: pa.DataType) -> dict:
    return {
        "window": WINDOWS[window],
        "keys": [["k", '"k"']],
        "aggregates": [
            {"name": "n", "function": "count"},
            {"name": "n_v", "function": "count", "argument": '"v"'},
            {"name": "total", "function": "sum", "argument": '"v"', "result_type": "BIGINT"},
            {"name": "small_total", "function": "sum", "argument": '"w"', "result_type": "INTEGER"},
            {"name": "low", "function": "min", "argument": '"v"'},
            {"name": "high", "function": "max", "argument": '"w"'},
            {"name": "latest", "function": "max", "argument": '"ts"'},
        ],
        "projection": [["k", '"k"'], ["window_start", '"window_start"'], ["window_end", "window_end"],
                       ["window_time", "window_time"], ["n", '"n"'], ["n_v", "n_v"], ["total", "total"],
                       ["small_total", "small_total"], ["low", "low"], ["high", "high"], ["latest", "latest"]],
    }


def schema(key_type: pa.DataType) -> pa.Schema:
    return SCHEMA.set(0, pa.field("k", key_type))


rows_strategy = st.lists(
    st.tuples(
        st.integers(-12 * SECOND, 12 * SECOND),                      # ts
        st.one_of(st.none(), st.integers(-3, 40)),                   # k
        st.one_of(st.none(), st.integers(-2**40, 2**40), st.integers(-9, 9)),  # v
        st.one_of(st.none(), st.integers(-2**20, 2**20)),            # w
    ),
    min_size=1, max_size=80,
)


@st.composite
def streams(draw):
    """Rows in arrival order (times out of order by up to 4 s), batch cuts, a watermark (as a lag
    behind the largest time so far: some make rows late, or fire part of a slice's windows) or
    none after each batch, a restore point, and a small-firing bound."""
    rows = draw(rows_strategy)
    rows.sort(key=lambda r: r[0] + draw(st.integers(0, 4 * SECOND)))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(rows) - 1)), max_size=10))))
    bounds = [0, *[c for c in cuts if c < len(rows)], len(rows)]
    batches = list(zip(bounds, bounds[1:]))
    lags = draw(st.lists(st.one_of(st.none(), st.integers(0, 5 * SECOND)), min_size=len(batches),
                         max_size=len(batches)))
    restore_at = draw(st.one_of(st.none(), st.integers(0, len(batches))))
    return rows, batches, lags, restore_at, draw(st.sampled_from([1, 3, 65_536]))


def table_of(rows, key_type: pa.DataType) -> pa.Table:
    keys = [None if r[1] is None else (f"key{r[1]}" if pa.types.is_string(key_type) else r[1]) for r in rows]
    return pa.table({
        "ts": pa.array([r[0] for r in rows], pa.timestamp("us")),
        "k": pa.array(keys, key_type),
        "v": pa.array([r[2] for r in rows], pa.int64()),
        "w": pa.array([r[3] for r in rows], pa.int32()),
    })


def run(table: pa.Table, batches, lags, restore_at, window: str, key_type, arrow: bool):
    """The stream through one operator: its output rows and its late rows."""
    def made():
        op = make_window_op(config(window, key_type), schema(key_type))
        if not arrow:
            op._partials = None
        return op

    op, out, high = made(), [], None
    for i, ((lo, hi), lag) in enumerate(zip(batches, lags)):
        if i == restore_at:
            resumed = made()
            resumed.restore(op.snapshot())
            op.close()
            op = resumed
        batch = table.slice(lo, hi - lo)
        out += op.process_batch(batch.to_batches()[0])
        times = batch.column("ts").cast(pa.int64()).to_pylist()
        high = max([high or times[0], *times])
        if lag is not None:
            out += op.process_watermark(high - lag)
    out += drive_to_end(op, [])
    return to_rows(out, schema(key_type)), op.ctx.metrics.get("late_rows_dropped", 0)


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("key_type", [pa.int64(), pa.int16(), pa.string()])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=streams())
def test_arrow_partials_give_what_duckdb_gives(window, key_type, stream):
    rows, batches, lags, restore_at, output_rows = stream
    table = table_of(rows, key_type)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", output_rows)  # a small one: held partials move to DuckDB
        in_arrow = run(table, batches, lags, restore_at, window, key_type, arrow=True)
        in_duckdb = run(table, batches, lags, restore_at, window, key_type, arrow=False)
    assert in_arrow == in_duckdb


def test_the_plain_aggregates_fire_without_a_duckdb_statement():
    op = make_window_op(config("hop", pa.int64()), schema(pa.int64()))
    table = table_of([(i * SECOND // 3, i % 5, i, i, ) for i in range(40)], pa.int64())
    out = op.process_batch(table.to_batches()[0]) + op.process_watermark(8 * SECOND)
    assert out and op._partials.rows and not op.state.sizes, "nothing appended to DuckDB"


def test_uint64_keys_past_int64_group_by_hash():
    keys = pa.array([2**64 - 1, 2**64 - 1, 2**63], pa.uint64())
    table = pa.table({"k": keys, "s": pa.array([0, 0, 0], pa.int64())})
    grouped, ordered = group(table, ["k"], "s", 10, [], [("rows", None, "count_all")])
    assert not ordered
    assert sorted(zip(grouped.column("k").to_pylist(), grouped.column("rows").to_pylist())) == [
        (2**63, 1), (2**64 - 1, 2)]


def test_a_sum_leaving_its_result_type_fails_as_in_duckdb():
    op = make_window_op(config("tumble", pa.int64()), schema(pa.int64()))
    table = table_of([(0, 1, 1, 2**31 - 1), (1, 1, 1, 1)], pa.int64())
    op.process_batch(table.to_batches()[0])
    with pytest.raises(EngineError, match="overflows INTEGER"):
        drive_to_end(op, [])


# -- the two ways of grouping ------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.integers(-4, 60), st.one_of(st.none(), st.integers(-2**31, 2**31)),
                               st.one_of(st.none(), st.integers(-100, 100))), min_size=1, max_size=60),
       key_type=st.sampled_from([pa.int64(), pa.int32(), pa.uint8()]))
def test_dense_grouping_is_pyarrows_in_slot_and_key_order(rows, key_type):
    rows = [r for r in rows if r[1] >= 0] if pa.types.is_unsigned_integer(key_type) else rows
    if not rows:
        return
    table = pa.table({"k": pa.array([r[1] for r in rows], key_type), "s": pa.array([r[0] * 10 for r in rows]),
                      "a": pa.array([r[2] for r in rows], pa.int64()), "b": pa.array([r[3] for r in rows], pa.int8())})
    aggregates = [("rows", None, "count_all"), ("n", "a", "count"), ("sum", "a", "sum"), ("low", "b", "min"),
                  ("high", "b", "max"), ("sum_b", "b", "sum"), ("high_a", "a", "max")]
    dense, ordered = group(table, ["k"], "s", 10, [], aggregates)
    assert ordered
    by_hash = table.group_by(["k", "s"], use_threads=False).aggregate(
        [([] if s is None else s, how) for _, s, how in aggregates])
    by_hash = by_hash.sort_by([("s", "ascending"), ("k", "ascending")])
    assert dense.column_names == ["k", "s"] + [name for name, _, _ in aggregates]
    assert dense.schema.field("k").type == key_type and dense.schema.field("low").type == pa.int8()
    expected = {name: by_hash.column(i).to_pylist() for i, name in enumerate(by_hash.column_names)}
    assert dense.column("k").to_pylist() == expected["k"]
    assert dense.column("s").to_pylist() == expected["s"]
    for name, source, how in aggregates:
        want = expected["count_all" if source is None else f"{source}_{how}"]
        assert dense.column(name).to_pylist() == want, name

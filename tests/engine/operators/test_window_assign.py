"""WindowAssign driven directly: the window bounds it computes in numpy equal the SQL that states the
window table function (``planner.windows.WindowSpec.assign_sql``, run by DuckDB), row for row and
in the same order, for negative times, offsets, NULL times and millisecond columns."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from weir.engine.operators.base import OperatorContext
from weir.engine.operators.window_assign import WindowAssign, WindowAssignConfig
from weir.engine.errors import EngineError
from weir.engine.operators.windows import SlicedWindowConfig, event_times
from weir.engine.watermarks import ARRIVAL_WATERMARK
from weir.planner.windows import WindowSpec, window_fields

SECOND = 1_000_000


def assign(spec: WindowSpec, batch: pa.RecordBatch) -> pa.Table:
    schema = pa.schema([*batch.schema, *window_fields()])
    if ARRIVAL_WATERMARK in batch.schema.names:
        schema = pa.schema([f for f in batch.schema if f.name != ARRIVAL_WATERMARK] + window_fields())
    op = WindowAssign(WindowAssignConfig(window=SlicedWindowConfig(**spec.config())), OperatorContext("assign", schema))
    out = op.process_batch(batch)
    return pa.Table.from_batches(out) if out else None


def by_sql(spec: WindowSpec, batch: pa.RecordBatch) -> list[dict]:
    con = duckdb.connect()
    con.register("rows", batch)
    items = ", ".join(f"{sql} AS {name}" for name, sql in spec.assign_sql())
    return con.sql(f"SELECT *, {items} FROM rows").to_arrow_table().to_pylist()


def rows(times: list[int | None], unit: str = "us") -> pa.RecordBatch:
    scale = {"us": 1, "ms": 1000}[unit]
    return pa.record_batch({"id": pa.array(range(len(times)), pa.int64()),
                            "ts": pa.array([t if t is None else t // scale for t in times], pa.timestamp(unit))})


def spec(kind: str, size: int, part: int, offset: int) -> WindowSpec:
    extra = {"hop": {"slide": part}, "cumulate": {"step": part}}.get(kind, {})
    return WindowSpec(kind, "ts", size=size, offset=offset, **extra)


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["tumble", "hop", "cumulate"]),
       part=st.integers(1, 5).map(lambda s: s * SECOND),
       per=st.integers(1, 4),
       offset=st.integers(-7, 7).map(lambda s: s * SECOND // 2),
       times=st.lists(st.one_of(st.none(), st.integers(-100 * SECOND, 100 * SECOND).map(lambda t: t // 1000 * 1000)),
                      min_size=1, max_size=30),
       unit=st.sampled_from(["us", "ms"]))
def test_bounds_equal_the_sql_definition(kind, part, per, offset, times, unit):
    window = spec(kind, part * per, part, offset) if kind != "tumble" else spec(kind, part * per, part * per, offset)
    batch = rows(times, unit)
    got = assign(window, batch)
    expected = by_sql(window, batch)
    assert (got.to_pylist() if got is not None else []) == expected


def test_a_tumble_row_with_a_null_time_keeps_null_bounds_and_hop_drops_it():
    batch = rows([SECOND, None])
    tumble = assign(spec("tumble", 10 * SECOND, 10 * SECOND, 0), batch).to_pylist()
    assert [r["window_start"] for r in tumble][1] is None and len(tumble) == 2
    hop = assign(spec("hop", 10 * SECOND, 5 * SECOND, 0), batch).to_pylist()
    assert [r["id"] for r in hop] == [0, 0]


def test_arrival_watermarks_pass_last_with_their_rows():
    batch = rows([SECOND, 7 * SECOND])
    batch = batch.append_column(ARRIVAL_WATERMARK, pa.array([5, 6], pa.int64()))
    out = assign(spec("hop", 4 * SECOND, 2 * SECOND, 0), batch)
    assert out.column_names[-1] == ARRIVAL_WATERMARK
    assert out.column(ARRIVAL_WATERMARK).to_pylist() == [5, 5, 6, 6]
    assert out.column("id").to_pylist() == [0, 0, 1, 1]


@pytest.mark.parametrize("batch,message", [
    (pa.record_batch({"other": pa.array([1], pa.int64())}), "time column 'ts' is not in the input"),
    (pa.record_batch({"ts": pa.array([1], pa.int64())}), "time column 'ts' is int64, not a timestamp"),
])
def test_a_time_column_missing_or_not_a_timestamp_is_named(batch, message):
    with pytest.raises(EngineError, match=message):
        event_times(batch, "ts", "w", "session window")


def test_event_times_are_microseconds_whatever_the_unit():
    batch = pa.record_batch({"ts": pa.array([1, None, -2], pa.timestamp("ms", "UTC"))})
    cast, micros = event_times(batch, "ts", "w")
    assert cast.schema.field("ts").type == pa.timestamp("us", "UTC")
    assert micros.to_pylist() == [1000, None, -2000]

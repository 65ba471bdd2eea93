"""HOP and CUMULATE through WindowAggregate against DuckDB's batch query on random data.

The oracle pairs every row with every window it belongs to, spelled out from
the window's definition (not from slices), and keeps a (row, window) pair only
if the window had not fired when the row arrived: a row some of whose windows
fired still counts in the others, as in Flink.
"""
from __future__ import annotations

import copy

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine.messages import MIN_WATERMARK
from test_window_aggregate_oracle import CONFIG, INT_CONFIG, INT_SCHEMA, SCHEMA, Rng, cadences, random_bids
from window_harness import SECOND, assert_same_rows, drive, drive_to_end, make_window_op, sliced_oracle, to_rows

WINDOWS = {
    "hop": {"kind": "hop", "time_column": "ts", "size": 10 * SECOND, "slide": 2 * SECOND, "offset": 1 * SECOND},
    "hop_size_is_slide": {"kind": "hop", "time_column": "ts", "size": 4 * SECOND, "slide": 4 * SECOND},
    "cumulate": {"kind": "cumulate", "time_column": "ts", "size": 12 * SECOND, "step": 3 * SECOND,
                 "offset": 2 * SECOND},
    "cumulate_one_step": {"kind": "cumulate", "time_column": "ts", "size": 5 * SECOND, "step": 5 * SECOND},
}


def with_window(config: dict, window: dict) -> dict:
    config = copy.deepcopy(config)
    config["window"] = dict(window)
    return config


def last_window_end(ts: int, window: dict) -> int:
    """The end of the last window holding ``ts``: once it fired, a row at ``ts`` is late."""
    size, offset = window["size"], window.get("offset", 0)
    if window["kind"] == "hop":
        slide = window["slide"]
        return ts - (ts - offset) % slide + size
    return ts - (ts - offset) % size + size


def first_window_end(ts: int, window: dict) -> int:
    """The end of the first window holding ``ts``: a watermark below it fires none of its windows."""
    width = window.get("slide") or window.get("step")
    return ts - (ts - window.get("offset", 0)) % width + width


@pytest.mark.parametrize("name", list(WINDOWS))
@pytest.mark.parametrize("seed", range(4))
def test_random_stream_matches_the_batch_query_over_windows_open_at_arrival(name, seed):
    window = WINDOWS[name]
    config = with_window(CONFIG, window)
    rng = Rng(seed)
    table = random_bids(rng, 2000, disorder=int(rng.integers(0, 8 * SECOND)))
    op = make_window_op(config, SCHEMA, max_parallelism=int(rng.integers(1, 200)))
    out, arrived, late = [], [], 0
    watermark, max_ts, start = MIN_WATERMARK, MIN_WATERMARK, 0
    while start < table.num_rows:
        size = int(rng.integers(1, 400))
        batch = table.slice(start, size)
        start += size
        times = batch.column("ts").cast(pa.int64()).to_pylist()
        late += sum(t is not None and last_window_end(t, window) - 1000 <= watermark for t in times)
        arrived.append(batch.append_column("__arrival_watermark", pa.array([watermark] * batch.num_rows)))
        out += drive(op, batch.to_batches())
        max_ts = max([max_ts] + [t for t in times if t is not None])
        if rng.random() < 0.6:
            watermark = max(watermark, max_ts - int(rng.integers(0, 6 * SECOND)))
            out += op.process_watermark(watermark)
    out += drive_to_end(op, [])
    expected = sliced_oracle(pa.concat_tables(arrived), config, SCHEMA)
    assert len(expected) > 20
    assert_same_rows(to_rows(out, SCHEMA), expected)
    assert op.ctx.metrics.get("late_rows_dropped", 0) == late
    assert op.ctx.metrics["rows_out"] == len(expected)


def count_config(window: dict) -> dict:
    """INT_CONFIG without HAVING: every window is emitted."""
    config = with_window(INT_CONFIG, window)
    config["having"] = None
    return config


def test_each_row_is_aggregated_once_into_its_slice():
    """State holds one partial per (key, slice), not one per window: a HOP of 10 slides
    keeps as many partials as a TUMBLE of the slide."""
    config = with_window(INT_CONFIG, {"kind": "hop", "time_column": "ts", "size": 10 * SECOND, "slide": SECOND})
    op = make_window_op(config, INT_SCHEMA)
    table = pa.table({
        "ts": pa.array([i * 100_000 for i in range(50)], pa.timestamp("us")),  # 5 slides
        "auction": pa.array([i % 2 for i in range(50)], pa.int64()),
        "price": pa.array(list(range(50)), pa.int64()),
    })
    op.process_batch(table.to_batches()[0])
    [(rows,)] = op.state.con.execute("SELECT count(*) FROM window_accumulators").fetchall()
    assert rows == 5 * 2


def test_state_of_a_slice_goes_when_its_last_window_fired():
    window = {"kind": "hop", "time_column": "ts", "size": 4 * SECOND, "slide": 2 * SECOND}
    op = make_window_op(count_config(window), INT_SCHEMA)
    batch = pa.record_batch({"ts": pa.array([0, 2 * SECOND], pa.timestamp("us")),
                             "auction": pa.array([1, 1], pa.int64()), "price": pa.array([1, 2], pa.int64())})
    op.process_batch(batch)
    fired = to_rows(op.process_watermark(2 * SECOND - 1000), INT_SCHEMA)  # [-2 s, 2 s) fires
    assert [r["n"] for r in fired] == [1]
    assert op.state.con.execute("SELECT count(*) FROM window_accumulators").fetchall() == [(2,)]
    fired = to_rows(op.process_watermark(4 * SECOND - 1000), INT_SCHEMA)  # [0, 4 s) fires
    assert [r["n"] for r in fired] == [2]
    assert op.state.con.execute("SELECT count(*) FROM window_accumulators").fetchall() == [(1,)]


def test_a_row_whose_first_windows_fired_still_counts_in_the_others():
    window = {"kind": "cumulate", "time_column": "ts", "size": 6 * SECOND, "step": 2 * SECOND}
    op = make_window_op(count_config(window), INT_SCHEMA)
    ts = lambda *v: pa.array(v, pa.timestamp("us"))  # noqa: E731
    op.process_batch(pa.record_batch({"ts": ts(SECOND), "auction": pa.array([1], pa.int64()),
                                      "price": pa.array([5], pa.int64())}))
    fired = to_rows(op.process_watermark(2 * SECOND - 1000), INT_SCHEMA)  # [0, 2 s) fires
    assert [(r["window_end"].second, r["n"]) for r in fired] == [(2, 1)]
    # a row at 1 s now misses [0, 2 s) but counts in [0, 4 s) and [0, 6 s)
    op.process_batch(pa.record_batch({"ts": ts(SECOND), "auction": pa.array([1], pa.int64()),
                                      "price": pa.array([7], pa.int64())}))
    assert "late_rows_dropped" not in op.ctx.metrics
    fired = to_rows(drive_to_end(op, []), INT_SCHEMA)
    assert [(r["window_end"].second, r["n"]) for r in fired] == [(4, 2), (6, 2)]


# -- properties: batching, watermark cadence and restoring change nothing ---------

rows_strategy = st.lists(
    st.tuples(
        st.integers(-20 * SECOND, 20 * SECOND),              # ts
        st.one_of(st.none(), st.integers(0, 3)),             # auction
        st.one_of(st.none(), st.integers(-5, 10)),           # price
    ),
    min_size=1, max_size=120,
)


def run_stream(table: pa.Table, config: dict, cadence) -> list[dict]:
    """Stream ``table`` split as ``cadence`` says; watermarks never fire a window of a later row."""
    batches, emit, lags, restore_at = cadence
    times = table.column("ts").cast(pa.int64()).to_pylist()
    op = make_window_op(config, INT_SCHEMA)
    out = []
    for i, ((lo, hi), wm, lag) in enumerate(zip(batches, emit, lags)):
        if i == restore_at:
            resumed = make_window_op(config, INT_SCHEMA)
            resumed.restore(op.snapshot())
            op.close()
            op = resumed
        out += op.process_batch(table.slice(lo, hi - lo).to_batches()[0])
        if wm and hi < len(times):
            safe = min(first_window_end(t, config["window"]) for t in times[hi:]) - 1001
            out += op.process_watermark(safe - lag)
    out += drive_to_end(op, [])
    assert "late_rows_dropped" not in op.ctx.metrics
    return to_rows(out, INT_SCHEMA)


@pytest.mark.parametrize("name", ["hop", "cumulate"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batch_sizes_watermark_cadence_and_restores_never_change_the_result(name, data):
    config = with_window(INT_CONFIG, WINDOWS[name])
    rows = sorted(data.draw(rows_strategy), key=lambda r: r[0])
    table = pa.table({
        "ts": pa.array([r[0] for r in rows], pa.timestamp("us")),
        "auction": pa.array([r[1] for r in rows], pa.int64()),
        "price": pa.array([r[2] for r in rows], pa.int64()),
    })
    first = run_stream(table, config, data.draw(cadences(len(rows))))
    second = run_stream(table, config, data.draw(cadences(len(rows))))
    assert first == second
    assert_same_rows(first, sliced_oracle(table, config, INT_SCHEMA))

"""WindowAggregate against DuckDB's batch query on random data, and properties of batching.

The oracle is ``SELECT <projection> FROM input GROUP BY keys, window HAVING ...``
over the rows that were not late, with windows from DuckDB's ``time_bucket``.
"""
from __future__ import annotations

import random
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine.messages import MIN_WATERMARK
from window_harness import (
    SECOND,
    assert_same_rows,
    drive,
    drive_to_end,
    make_window_op,
    to_rows,
    tumble_oracle,
)

SIZE = 10 * SECOND

CONFIG = {
    "window": {"kind": "tumble", "time_column": "ts", "size": SIZE, "offset": 3 * SECOND},
    "keys": [["auction", "auction"], ["kind", "upper(kind)"]],
    "aggregates": [
        {"name": "n", "function": "count", "argument": None, "distinct": False, "filter": None},
        {"name": "n_price", "function": "count", "argument": "price"},
        {"name": "n_big", "function": "count", "argument": None, "filter": "price > 60"},
        {"name": "total", "function": "sum", "argument": "price", "filter": "bidder % 2 = 0"},
        {"name": "low", "function": "min", "argument": "price"},
        {"name": "high", "function": "max", "argument": "ratio"},
        {"name": "mean", "function": "avg", "argument": "price"},
        {"name": "mean_ratio", "function": "avg", "argument": "ratio", "filter": "price < 50"},
        {"name": "bidders", "function": "count", "argument": "bidder", "distinct": True},
        {"name": "big_bidders", "function": "count", "argument": "bidder", "distinct": True,
         "filter": "price > 20"},
        {"name": "bidder_sum", "function": "sum", "argument": "bidder", "distinct": True,
         "filter": "price > 20"},
        {"name": "bidder_avg", "function": "avg", "argument": "bidder", "distinct": True},
        {"name": "low_d", "function": "min", "argument": "bidder", "distinct": True},
    ],
    "having": "n >= 2 OR total IS NULL",
    "projection": [
        ["auction", "auction"], ["kind", "kind"], ["window_start", "window_start"],
        ["window_end", "window_end"], ["window_time", "window_time"], ["n", "n"],
        ["n_price", "n_price"], ["n_big", "n_big"], ["total", "total"], ["low", "low"],
        ["high", "high"], ["mean", "mean"], ["mean_ratio", "mean_ratio"],
        ["bidders", "bidders"], ["big_bidders", "big_bidders"], ["bidder_sum", "bidder_sum"],
        ["bidder_avg", "bidder_avg"], ["low_d", "low_d"],
        ["score", "coalesce(total, 0) * 2 + bidders - n_big / n"],
    ],
}

SCHEMA = pa.schema([
    ("auction", pa.int64()), ("kind", pa.string()), ("window_start", pa.timestamp("us")),
    ("window_end", pa.timestamp("us")), ("window_time", pa.timestamp("us")),
    ("n", pa.int64()), ("n_price", pa.int64()), ("n_big", pa.int64()), ("total", pa.int64()),
    ("low", pa.int32()), ("high", pa.float64()), ("mean", pa.float64()),
    ("mean_ratio", pa.float64()), ("bidders", pa.int64()), ("big_bidders", pa.int64()),
    ("bidder_sum", pa.int64()), ("bidder_avg", pa.float64()), ("low_d", pa.int64()),
    ("score", pa.float64()),
])


class Rng:
    """The few draws these tests need, from the standard library, seeded."""

    def __init__(self, seed: int):
        self._random = random.Random(seed)

    def integers(self, low: int, high: int, n: int | None = None):
        if n is None:
            return self._random.randrange(low, high)
        return [self._random.randrange(low, high) for _ in range(n)]

    def random(self, n: int | None = None):
        return self._random.random() if n is None else [self._random.random() for _ in range(n)]

    def choice(self, values: list, n: int) -> list:
        return [self._random.choice(values) for _ in range(n)]


def random_bids(rng: Rng, n: int, disorder: int) -> pa.Table:
    """Bids in rough time order (each row up to ``disorder`` µs early), with NULLs everywhere."""
    ordered = sorted(rng.integers(-40 * SECOND, 60 * SECOND, n))
    ts = [t - d for t, d in zip(ordered, rng.integers(0, disorder + 1, n))]

    def nullable(values, p, type=None):
        return pa.array(values, type=type, mask=pa.array([r < p for r in rng.random(n)]))

    return pa.table({
        "auction": nullable(rng.integers(0, 5, n), 0.05, pa.int64()),
        "kind": nullable(rng.choice(["a", "b", "c"], n), 0.05),
        "price": nullable(rng.integers(-20, 100, n), 0.1, pa.int32()),
        "ratio": nullable([r * 10 for r in rng.random(n)], 0.1),
        "bidder": nullable(rng.integers(0, 30, n), 0.1, pa.int64()),
        "ts": nullable(ts, 0.02, pa.timestamp("us")),
    })


def window_end(ts: int, size=SIZE, offset=3 * SECOND) -> int:
    return ts - (ts - offset) % size + size


@pytest.mark.parametrize("seed", range(8))
def test_random_stream_matches_the_batch_query_over_rows_that_were_not_late(seed):
    rng = Rng(seed)
    table = random_bids(rng, 3000, disorder=int(rng.integers(0, 8 * SECOND)))
    op = make_window_op(CONFIG, SCHEMA, max_parallelism=int(rng.integers(1, 200)))
    out, kept, late = [], [], 0
    watermark, max_ts, start = MIN_WATERMARK, MIN_WATERMARK, 0
    while start < table.num_rows:
        size = int(rng.integers(1, 400))
        batch = table.slice(start, size)
        start += size
        times = batch.column("ts").cast(pa.int64()).to_pylist()
        on_time = [t is not None and window_end(t) - 1000 > watermark for t in times]
        late += sum(t is not None and not ok for t, ok in zip(times, on_time))
        kept.append(batch.filter(pa.array(on_time)))
        out += drive(op, batch.to_batches())
        max_ts = max([max_ts] + [t for t in times if t is not None])
        if rng.random() < 0.6:
            watermark = max(watermark, max_ts - int(rng.integers(0, 6 * SECOND)))
            out += op.process_watermark(watermark)
    out += drive_to_end(op, [])
    expected = tumble_oracle(pa.concat_tables(kept), CONFIG, SCHEMA)
    assert len(expected) > 20
    assert_same_rows(to_rows(out, SCHEMA), expected)
    assert op.ctx.metrics.get("late_rows_dropped", 0) == late
    assert op.ctx.metrics["null_time_rows_dropped"] == table.column("ts").null_count
    assert op.ctx.metrics["rows_out"] == len(expected)


# -- properties: batching, watermark cadence and restoring change nothing ---------

INT_CONFIG = {
    "window": {"kind": "tumble", "time_column": "ts", "size": 5 * SECOND, "offset": 0},
    "keys": [["auction", "auction"]],
    "aggregates": [
        {"name": "n", "function": "count", "argument": None},
        {"name": "total", "function": "sum", "argument": "price", "filter": "price > 2"},
        {"name": "low", "function": "min", "argument": "price"},
        {"name": "high", "function": "max", "argument": "price"},
        {"name": "mean", "function": "avg", "argument": "price"},
        {"name": "prices", "function": "count", "argument": "price", "distinct": True},
    ],
    "having": "n > 1 OR prices = 0",
    "projection": [["auction", "auction"], ["window_end", "window_end"], ["n", "n"],
                   ["total", "total"], ["low", "low"], ["high", "high"], ["mean", "mean"],
                   ["prices", "prices"]],
}
INT_SCHEMA = pa.schema([
    ("auction", pa.int64()), ("window_end", pa.timestamp("us")), ("n", pa.int64()),
    ("total", pa.int64()), ("low", pa.int64()), ("high", pa.int64()), ("mean", pa.float64()),
    ("prices", pa.int64()),
])

rows_strategy = st.lists(
    st.tuples(
        st.integers(-20 * SECOND, 20 * SECOND),              # ts
        st.one_of(st.none(), st.integers(0, 3)),             # auction
        st.one_of(st.none(), st.integers(-5, 10)),           # price
    ),
    min_size=1, max_size=120,
)


@st.composite
def cadences(draw, n: int):
    """Batch boundaries, whether a watermark follows each batch, and a restore point."""
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, n - 1)), max_size=12))))
    bounds = [0, *[c for c in cuts if c < n], n]
    batches = list(zip(bounds, bounds[1:]))
    emit = draw(st.lists(st.booleans(), min_size=len(batches), max_size=len(batches)))
    lags = draw(st.lists(st.integers(0, 3 * SECOND), min_size=len(batches), max_size=len(batches)))
    restore_at = draw(st.one_of(st.none(), st.integers(0, len(batches))))
    return batches, emit, lags, restore_at


def run_stream(table: pa.Table, cadence) -> list[dict]:
    """Stream ``table`` split as ``cadence`` says; watermarks never make a row late."""
    batches, emit, lags, restore_at = cadence
    times = table.column("ts").cast(pa.int64()).to_pylist()
    size = INT_CONFIG["window"]["size"]
    op = make_window_op(INT_CONFIG, INT_SCHEMA)
    out = []
    for i, ((lo, hi), wm, lag) in enumerate(zip(batches, emit, lags)):
        if i == restore_at:
            resumed = make_window_op(INT_CONFIG, INT_SCHEMA)
            resumed.restore(op.snapshot())
            op.close()
            op = resumed
        out += op.process_batch(table.slice(lo, hi - lo).to_batches()[0])
        if wm and hi < len(times):
            # the highest watermark that leaves every later row's window open
            safe = min(window_end(t, size, 0) for t in times[hi:]) - 1001
            out += op.process_watermark(safe - lag)
    out += drive_to_end(op, [])
    assert "late_rows_dropped" not in op.ctx.metrics
    return to_rows(out, INT_SCHEMA)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_batch_sizes_watermark_cadence_and_restores_never_change_the_result(data):
    rows = sorted(data.draw(rows_strategy), key=lambda r: r[0])
    table = pa.table({
        "ts": pa.array([r[0] for r in rows], pa.timestamp("us")),
        "auction": pa.array([r[1] for r in rows], pa.int64()),
        "price": pa.array([r[2] for r in rows], pa.int64()),
    })
    first = run_stream(table, data.draw(cadences(len(rows))))
    second = run_stream(table, data.draw(cadences(len(rows))))
    assert first == second
    assert_same_rows(first, tumble_oracle(table, INT_CONFIG, INT_SCHEMA))

"""Measure checkpoint storage on 1,000,000 rows of real window state (not a test).

    python tests/engine/checkpoint/measure_storage.py [rows]

A WindowAggregate (COUNT, SUM, MAX, AVG per auction, 10 s tumbling windows) is fed
``rows`` bids with distinct auctions, so its ``window_accumulators`` table holds
``rows`` rows; the snapshot is written, committed, verified by ``latest()``, loaded
whole and by a third of the key groups, and restored into a fresh operator.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.window_aggregate import WindowAggregate

OP = "bids.window_aggregate"
CONFIG = {
    "window": {"kind": "tumble", "time_column": "date_time", "size": 10_000_000, "offset": 0},
    "keys": [["auction", "auction"]],
    "aggregates": [
        {"name": "n", "function": "count", "argument": None},
        {"name": "total", "function": "sum", "argument": "price"},
        {"name": "high", "function": "max", "argument": "price"},
        {"name": "mean", "function": "avg", "argument": "price"},
    ],
    "having": None,
    "projection": [["auction", "auction"], ["n", "n"]],
}
SCHEMA = pa.schema([("auction", pa.int64()), ("n", pa.int64())])


def window_op() -> WindowAggregate:
    op = WindowAggregate(CONFIG, OperatorContext(OP, SCHEMA))
    op.open()
    return op


class Clock:
    """Times an action; one that only reads is repeated, to show first and best of three."""

    def __init__(self):
        self.figures: list[tuple[str, list[float]]] = []

    def time(self, label: str, action, repeat: int = 1):
        seconds = []
        for _ in range(repeat):
            start = time.perf_counter()
            result = action()
            seconds.append(time.perf_counter() - start)
        self.figures.append((label, seconds))
        return result


def main(rows: int) -> None:
    op = window_op()
    op.process_batch(pa.record_batch({
        "auction": pa.array(range(rows), pa.int64()),
        "price": pa.array([i % 1000 for i in range(rows)], pa.int64()),
        "date_time": pa.array([i % 10_000_000 for i in range(rows)], pa.timestamp("us")),
    }))
    clock = Clock()
    snapshot = clock.time("snapshot (the operator's copy, not storage)", op.snapshot)
    table = snapshot["tables"]["window_accumulators"]
    with tempfile.TemporaryDirectory() as tmp:
        storage = CheckpointStorage(Path(tmp) / "checkpoints")
        writer = storage.writer(1)
        clock.time("write_state (sort check, Parquet zstd, sha256, fsync)", lambda: writer.write_state(OP, 0, snapshot))
        info = clock.time("commit (_metadata, fsyncs)", lambda: writer.commit({}))
        checkpoint = clock.time("latest() (parse + verify every file)", storage.latest, 3)
        (state,) = clock.time("operator_state, all key groups", lambda: checkpoint.operator_state(OP), 3)
        clock.time("operator_state, key groups 0..42", lambda: checkpoint.operator_state(OP, range(0, 43)), 3)
        resumed = window_op()
        clock.time("restore into a fresh operator (not storage)", lambda: resumed.restore(state))
        assert state["tables"]["window_accumulators"].equals(table)
    print(f"{table.num_rows:,} rows, {len(table.schema)} columns, {table.nbytes / 1e6:.1f} MB in Arrow; "
          f"on disk {info.size_bytes / 1e6:.1f} MB")
    print(f"  {'':<56} {'first':>8} {'best of 3':>10}")
    for label, seconds in clock.figures:
        best = f"{min(seconds) * 1000:8.0f} ms" if len(seconds) > 1 else ""
        print(f"  {label:<56} {seconds[0] * 1000:5.0f} ms {best:>10}")
    first = sum(s[0] for label, s in clock.figures if label.startswith(("latest", "operator_state, all")))
    print(f"  {'verify + load, first time (latest + operator_state)':<56} {first * 1000:5.0f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)

"""OverAggregate driven directly, against DuckDB's own window functions over all rows.

Rows arrive in batches of random sizes with bounded disorder and a watermark
that never makes a row late; the result must equal DuckDB's window functions
over all rows (ties in time broken by every column, as the operator does).
Snapshots are restored anywhere in between, also at another parallelism.
"""
from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.over_aggregate import OverAggregate
from weir.engine.state.key_groups import key_groups, range_for_subtask

SECOND = 1_000_000
MAX_P = 16
TS = pa.timestamp("us")
INPUT = pa.schema([("k", pa.string()), ("v", pa.int64()), ("x", pa.float64()), ("ts", TS)])
AGGREGATES = [("count", None), ("count", "x"), ("sum", "v"), ("avg", "v"), ("min", "x"), ("max", "v"),
              ("sum", "x")]
OUTPUT_TYPES = {"count": pa.int64(), "avg": pa.float64()}
FRAMES = {
    "rows": ({"kind": "rows", "preceding": 3}, "ROWS BETWEEN 3 PRECEDING AND CURRENT ROW", True),
    "rows0": ({"kind": "rows", "preceding": 0}, "ROWS BETWEEN 0 PRECEDING AND CURRENT ROW", True),
    "range": ({"kind": "range", "preceding": 5 * SECOND},
              "RANGE BETWEEN INTERVAL '5 seconds' PRECEDING AND CURRENT ROW", False),
    "unbounded_rows": ({"kind": "unbounded", "mode": "rows"},
                       "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", True),
    "unbounded_range": ({"kind": "unbounded", "mode": "range"},
                        "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", False),
}


def output_schema() -> pa.Schema:
    fields = list(INPUT)
    for i, (function, argument) in enumerate(AGGREGATES):
        fields.append(pa.field(f"a{i}", OUTPUT_TYPES.get(function, INPUT.field(argument).type if argument else None)))
    return pa.schema(fields)


def make_op(frame: str, keys=("k",), subtask: int = 0, parallelism: int = 1) -> OverAggregate:
    config = {"columns": INPUT.names, "partition_keys": list(keys), "time_column": "ts",
              "frame": FRAMES[frame][0],
              "aggregates": [{"name": f"a{i}", "function": f, "argument": a} for i, (f, a) in enumerate(AGGREGATES)]}
    ctx = OperatorContext("over", output_schema(), subtask_index=subtask, parallelism=parallelism,
                          max_parallelism=MAX_P)
    op = OverAggregate(config, ctx)
    op.open()
    return op


def random_rows(rng: random.Random, n: int) -> pa.Table:
    """Rows over 60 s in whole seconds (ties happen), keys a..d and NULL, some NULL values."""
    times = sorted(rng.randrange(0, 60) * SECOND for _ in range(n))
    return pa.table([
        pa.array([rng.choice(["a", "b", "c", "d", None]) for _ in range(n)], pa.string()),
        pa.array([rng.choice([None, *range(-5, 20)]) for _ in range(n)], pa.int64()),
        pa.array([rng.choice([None, 0.5, 1.25, -3.0, 7.75]) for _ in range(n)], pa.float64()),
        pa.array(times, TS),
    ], schema=INPUT)


def oracle(rows: pa.Table, frame: str, keys=("k",)) -> list[tuple]:
    con = duckdb.connect()
    con.register("t", rows)
    _, frame_sql, ties = FRAMES[frame]
    order = "ts, k, v, x" if ties else "ts"
    partition = f"PARTITION BY {', '.join(keys)} " if keys else ""
    calls = ", ".join(
        f"{f}({a or '*'}) OVER w" if f != "sum" or a != "v" else "CAST(sum(v) OVER w AS BIGINT)"
        for f, a in AGGREGATES)
    return sorted(con.execute(f"SELECT *, {calls} FROM t WINDOW w AS ({partition}ORDER BY {order} {frame_sql})")
                  .fetchall(), key=repr)


def result(batches: list[pa.RecordBatch]) -> list[tuple]:
    for b in batches:
        assert b.schema == output_schema()
    table = pa.Table.from_batches(batches, schema=output_schema())
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def steps(rng: random.Random, rows: pa.Table, max_batch: int) -> list:
    """Batches of random sizes, each rotated (disorder within a batch), then a watermark just
    below the batch's last time: later rows are never late."""
    out, at = [], 0
    while at < rows.num_rows:
        n = rng.randint(1, max_batch)
        piece = rows.slice(at, n)
        order = list(range(piece.num_rows))
        rng.shuffle(order)
        out += [piece.take(order), piece.column("ts")[-1].value - 1]
        at += n
    return out + [MAX_WATERMARK]


class Driver:
    def __init__(self, ops: list[OverAggregate], keys=("k",)):
        self.ops, self.keys = ops, list(keys)
        self.out: list[pa.RecordBatch] = []

    def step(self, item) -> None:
        if isinstance(item, int):
            for op in self.ops:
                self.out += op.process_watermark(item)
            return
        owners = key_groups(item, self.keys, MAX_P).to_pylist()
        for i, op in enumerate(self.ops):
            owned = range_for_subtask(i, len(self.ops), MAX_P)
            for batch in item.filter(pa.array([g in owned for g in owners])).to_batches():
                self.out += op.process_batch(batch)


@pytest.mark.parametrize("frame", list(FRAMES))
@pytest.mark.parametrize("keys", [("k",), ()])
def test_every_frame_equals_duckdb_window_functions(frame, keys):
    rng = random.Random(f"{frame}{keys}")
    rows = random_rows(rng, 150)
    driver = Driver([make_op(frame, keys)], keys)
    for item in steps(rng, rows, 11):
        driver.step(item)
    assert result(driver.out) == oracle(rows, frame, keys)


def test_rows_wait_for_the_watermark_and_come_out_in_time_order():
    op = make_op("unbounded_rows")
    batch = random_rows(random.Random(1), 10).to_batches()[0]
    assert op.process_batch(batch) == []
    out = op.process_watermark(batch.column(3)[4].value)
    times = [r["ts"] for b in out for r in b.to_pylist()]
    assert times == sorted(times) and 0 < len(times) < 10
    assert op.state_rows()["pending"] == 10 - len(times)


def test_late_rows_are_dropped_and_counted():
    op = make_op("rows")
    op.process_watermark(10 * SECOND)
    late = pa.record_batch([pa.array(["a", "a"]), pa.array([1, 2], pa.int64()), pa.array([1.0, 2.0]),
                            pa.array([10 * SECOND, 11 * SECOND], TS)], schema=INPUT)
    op.process_batch(late)
    assert op.ctx.metrics["late_rows_dropped"] == 1
    out = result(op.process_watermark(MAX_WATERMARK))
    assert [(r[1], r[4]) for r in out] == [(2, 1)]


@pytest.mark.parametrize(("frame", "bound"), [("rows", 3 * 4 + 4), ("range", 6 * 4 + 4), ("unbounded_range", 4 + 1)])
def test_history_stays_bounded(frame, bound):
    """Only what a future frame can reach is kept: the last 3 rows per key, the last 5 s, one accumulator."""
    rng = random.Random(2)
    op = make_op(frame)
    most = 0
    for second in range(300):
        batch = pa.record_batch([pa.array([rng.choice("abcd") for _ in range(3)]),
                                 pa.array([1, 2, 3], pa.int64()), pa.array([0.5] * 3),
                                 pa.array([second * SECOND] * 3, TS)], schema=INPUT)
        op.process_batch(batch)
        op.process_watermark(second * SECOND)
        most = max(most, op.state_rows()["history"])
    assert most <= bound, f"history grew to {most} rows"


@given(seed=st.integers(0, 10_000), max_batch=st.integers(1, 40), frame=st.sampled_from(list(FRAMES)),
       restore_at=st.floats(0, 1), parallelism=st.sampled_from([1, 2, 3]))
@settings(max_examples=40, deadline=None)
def test_batching_and_restore_never_change_the_result(seed, max_batch, frame, restore_at, parallelism):
    rng = random.Random(seed)
    rows = random_rows(rng, rng.randint(0, 80))
    items = steps(rng, rows, max_batch)
    cut = int(len(items) * restore_at)
    first = Driver([make_op(frame)])
    for item in items[:cut]:
        first.step(item)
    snapshot = OverAggregate.merge_snapshots([first.ops[0].snapshot()])
    restored = [make_op(frame, subtask=i, parallelism=parallelism) for i in range(parallelism)]
    for op in restored:
        op.restore(snapshot)
    second = Driver(restored)
    for item in items[cut:]:
        second.step(item)
    assert result(first.out + second.out) == oracle(rows, frame)


def test_restore_refuses_another_max_parallelism_and_version():
    snap = make_op("rows").snapshot()
    op = OverAggregate(make_op("rows").config, OperatorContext("over", output_schema(), max_parallelism=8))
    with pytest.raises(EngineError, match="max parallelism 16"):
        op.restore(snap)
    with pytest.raises(EngineError, match="version"):
        make_op("rows").restore({**snap, "version": 99})


def test_config_errors_name_the_problem():
    config = make_op("rows").config.to_json()
    ctx = OperatorContext("over", output_schema())
    with pytest.raises(EngineError, match="unknown OVER frame 'groups'"):
        OverAggregate({**config, "frame": {"kind": "groups"}}, ctx)
    with pytest.raises(EngineError, match="nope"):
        OverAggregate({**config, "time_column": "nope"}, ctx)
    with pytest.raises(EngineError, match="median"):
        OverAggregate({**config, "aggregates": [{"name": "a", "function": "median", "argument": "v"}] * 7}, ctx)


TYPED = pa.schema([("k", pa.string()), ("i", pa.int32()), ("d", pa.decimal128(10, 2)), ("ts", TS)])
TYPED_AGGREGATES = [("avg", "i", "INTEGER", pa.int32()), ("sum", "i", "INTEGER", pa.int32()),
                    ("avg", "d", "DECIMAL(38, 6)", pa.decimal128(38, 6)),
                    ("sum", "d", "DECIMAL(38, 2)", pa.decimal128(38, 2))]


def typed_op(frame: str) -> OverAggregate:
    config = {"columns": TYPED.names, "partition_keys": ["k"], "time_column": "ts", "frame": FRAMES[frame][0],
              "aggregates": [{"name": f"a{i}", "function": f, "argument": a, "result_type": t}
                             for i, (f, a, t, _) in enumerate(TYPED_AGGREGATES)]}
    schema = pa.schema([*TYPED, *(pa.field(f"a{i}", k) for i, (*_, k) in enumerate(TYPED_AGGREGATES))])
    op = OverAggregate(config, OperatorContext("over", schema, max_parallelism=MAX_P))
    op.open()
    return op


@pytest.mark.parametrize("frame", ["rows", "range", "unbounded_rows", "unbounded_range"])
@given(seed=st.integers(0, 10_000), max_batch=st.integers(1, 12), restore_at=st.integers(0, 12))
@settings(max_examples=10, deadline=None)
def test_typed_averages_truncate_and_round_half_up_through_batches_and_restores(frame, seed, max_batch,
                                                                                restore_at):
    """AVG(INT) is an INT truncated toward zero, AVG(DECIMAL(10, 2)) a DECIMAL(38, 6) rounded half up,
    whatever the batching, and also after a restore (the sums come back from a snapshot as
    DECIMAL(38, 0), where DuckDB's `//` would divide exactly): the oracle is DuckDB's window
    functions over all rows, computed exactly and then truncated or rounded as Flink does."""
    rng = random.Random(seed)
    n = 30
    times = sorted(rng.randrange(0, 30) * SECOND for _ in range(n))
    rows = pa.table([pa.array([rng.choice("ab") for _ in range(n)]),
                     pa.array([rng.choice([None, -7, -2, 3, 5]) for _ in range(n)], pa.int32()),
                     pa.array([rng.choice([None, "-0.05", "0.01", "1.99"]) for _ in range(n)]).cast(pa.decimal128(10, 2)),
                     pa.array(times, TS)], schema=TYPED)
    _, frame_sql, ties = FRAMES[frame]
    con = duckdb.connect()
    con.register("t", rows)
    exact = con.execute(
        f"SELECT k, i, d, ts, sum(i) OVER w, count(i) OVER w, sum(d) OVER w, count(d) OVER w FROM t "
        f"WINDOW w AS (PARTITION BY k ORDER BY {'ts, k, i, d' if ties else 'ts'} {frame_sql})").fetchall()
    from decimal import ROUND_HALF_UP, Decimal

    def avg_int(total, count):
        return None if not count else int(abs(total) // count) * (1 if total >= 0 else -1)

    def avg_dec(total, count):
        return None if not count else (Decimal(total) / count).quantize(Decimal("0.000001"), ROUND_HALF_UP)

    want = sorted(((k, i, d, ts, avg_int(si, ci), si, avg_dec(sd, cd), sd)
                   for k, i, d, ts, si, ci, sd, cd in exact), key=repr)
    op, out = typed_op(frame), []
    for index, item in enumerate(steps(rng, rows, max_batch)):
        if index == restore_at:
            state = op.snapshot()
            op = typed_op(frame)
            op.restore(state)
        if isinstance(item, int):
            out += op.process_watermark(item)
        else:
            for batch in item.to_batches():
                out += op.process_batch(batch)
    got = sorted((tuple(r.values()) for r in pa.Table.from_batches(out).to_pylist()), key=repr)
    assert got == want

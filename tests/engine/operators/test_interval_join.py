"""IntervalJoin driven directly, against DuckDB's batch join of the same rows.

Each side's rows arrive in batches of random sizes, out of order within a
batch, the two sides interleaved at random; after a batch its input's watermark is just
below its last row's time, so no row is late and the streaming result must
equal the batch join over all rows. Snapshots are restored anywhere in
between, also at another parallelism.
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
from weir.engine.operators.interval_join import JOIN_TYPES, IntervalJoin
from weir.engine.state.key_groups import key_groups, range_for_subtask

SECOND = 1_000_000
MAX_P = 16
TS = pa.timestamp("us")
LEFT = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("ts", TS)])
RIGHT = pa.schema([("k", pa.int64()), ("w", pa.string()), ("ts", TS)])
OUTPUT = pa.schema([*(f.with_name(f"l_{f.name}") for f in LEFT), *(f.with_name(f"r_{f.name}") for f in RIGHT)])
#: (lower, upper) in seconds: r.ts - l.ts between them
BOUNDS = [(-3, 2), (0, 0), (1, 4), (-5, -1), (-2, 2)]


def side_config(schema: pa.Schema) -> dict:
    return {"columns": schema.names, "keys": ["k"], "time": "ts"}


def make_join(join_type: str, bounds=(-3, 2), strict=(False, False), subtask: int = 0,
              parallelism: int = 1) -> IntervalJoin:
    config = {"join_type": join_type, "lower": bounds[0] * SECOND, "upper": bounds[1] * SECOND,
              "lower_strict": strict[0], "upper_strict": strict[1],
              "left": side_config(LEFT), "right": side_config(RIGHT)}
    ctx = OperatorContext("join", OUTPUT, subtask_index=subtask, parallelism=parallelism, max_parallelism=MAX_P)
    op = IntervalJoin(config, ctx)
    op.open()
    return op


def rows(schema: pa.Schema, times: list[int], keys: list, values: list) -> pa.RecordBatch:
    return pa.record_batch([pa.array(keys, pa.int64()), pa.array(values, schema.field(1).type),
                            pa.array(times, TS)], schema=schema)


def random_side(rng: random.Random, schema: pa.Schema, n: int) -> pa.RecordBatch:
    """Rows in time order over 40 s (whole seconds, so bounds are hit exactly), keys 0..4 and NULLs."""
    times = sorted(rng.randrange(0, 40) * SECOND for _ in range(n))
    keys = [rng.choice([None, 0, 1, 2, 3, 4]) for _ in range(n)]
    values = [i if schema is LEFT else f"w{i}" for i in range(n)]
    return rows(schema, times, keys, values)


def oracle(join_type: str, left: pa.Table, right: pa.Table, bounds, strict=(False, False)) -> list[tuple]:
    con = duckdb.connect()
    con.register("l", left)
    con.register("r", right)
    lo, hi = bounds
    on = (f"l.k = r.k AND r.ts {'>' if strict[0] else '>='} l.ts + INTERVAL '{lo} seconds' "
          f"AND r.ts {'<' if strict[1] else '<='} l.ts + INTERVAL '{hi} seconds'")
    kind = {"inner": "", "left": "LEFT", "right": "RIGHT", "full": "FULL"}[join_type]
    return sorted(con.execute(f"SELECT l.*, r.* FROM l {kind} JOIN r ON {on}").fetchall(), key=repr)


def result(batches: list[pa.RecordBatch]) -> list[tuple]:
    for b in batches:
        assert b.schema == OUTPUT
    table = pa.Table.from_batches(batches, schema=OUTPUT)
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


def interleave(rng: random.Random, left: pa.RecordBatch, right: pa.RecordBatch, max_batch: int) -> list:
    """Steps ``(input, batch)`` and ``(input, watermark)``; each batch shuffled, its watermark 1 µs
    below its latest time (rows are in time order across batches on each side, so none is late)."""
    queues = []
    for index, batch in enumerate((left, right)):
        steps, at = [], 0
        while at < batch.num_rows:
            n = rng.randint(1, max_batch)
            piece = batch.slice(at, n)
            order = list(range(piece.num_rows))
            rng.shuffle(order)  # out of order within the batch, never behind the watermark
            steps += [(index, piece.take(order)), (index, piece.column(2)[-1].value - 1)]
            at += n
        queues.append(steps)
    out = []
    while queues[0] or queues[1]:
        side = rng.choice([i for i in (0, 1) if queues[i]])
        out.append(queues[side].pop(0))
        if not isinstance(out[-1][1], int) and queues[side]:
            out.append(queues[side].pop(0))
    return out


class Driver:
    """Steps delivered as the executor does: the operator sees the minimum of its inputs' watermarks;
    at parallelism > 1 each subtask gets the rows of its key groups."""

    def __init__(self, ops: list[IntervalJoin]):
        self.ops = ops
        self.watermarks = [-(2**63), -(2**63)]
        self.out: list[pa.RecordBatch] = []

    def step(self, index: int, item) -> None:
        if isinstance(item, int):
            self.watermarks[index] = max(self.watermarks[index], item)
            for op in self.ops:
                self.out += op.process_watermark(min(self.watermarks))
            return
        owners = key_groups(item, ["k"], MAX_P).to_pylist()
        for i, op in enumerate(self.ops):
            owned = range_for_subtask(i, len(self.ops), MAX_P)
            self.out += op.process_batch(item.filter(pa.array([g in owned for g in owners])), index)

    def finish(self) -> None:
        for index in (0, 1):
            self.step(index, MAX_WATERMARK)


@pytest.mark.parametrize("join_type", JOIN_TYPES)
@pytest.mark.parametrize("bounds", BOUNDS)
def test_every_join_type_and_bound_equals_duckdb_batch_join(join_type, bounds):
    rng = random.Random(f"{join_type}{bounds}")
    left, right = random_side(rng, LEFT, 120), random_side(rng, RIGHT, 90)
    driver = Driver([make_join(join_type, bounds)])
    for index, item in interleave(rng, left, right, 13):
        driver.step(index, item)
    driver.finish()
    expected = oracle(join_type, pa.table(left), pa.table(right), bounds)
    assert any(r[0] is not None and r[3] is not None for r in expected), "the random data should join"
    assert result(driver.out) == expected


@pytest.mark.parametrize("strict", [(True, False), (False, True), (True, True)])
def test_strict_bounds_exclude_the_edges(strict):
    rng = random.Random(5)
    left, right = random_side(rng, LEFT, 80), random_side(rng, RIGHT, 80)
    driver = Driver([make_join("full", (-2, 2), strict)])
    for index, item in interleave(rng, left, right, 7):
        driver.step(index, item)
    driver.finish()
    expected = oracle("full", pa.table(left), pa.table(right), (-2, 2), strict)
    assert expected != oracle("full", pa.table(left), pa.table(right), (-2, 2))
    assert result(driver.out) == expected


def test_state_is_dropped_as_the_watermark_passes():
    """A left row waits ``hi`` past its time, a right row ``-lo``; then both are gone."""
    op = make_join("inner", (-3, 2))
    op.process_batch(rows(LEFT, [10 * SECOND], [1], [1]), 0)
    op.process_batch(rows(RIGHT, [10 * SECOND], [1], ["a"]), 1)
    assert op.state_rows() == {"left": 1, "right": 1}
    op.process_watermark(12 * SECOND - 1)
    assert op.state_rows() == {"left": 1, "right": 1}
    op.process_watermark(12 * SECOND)  # no right row above 12 s can match the left row at 10 s
    assert op.state_rows() == {"left": 0, "right": 1}
    op.process_watermark(13 * SECOND)  # no left row above 13 s can match the right row at 10 s
    assert op.state_rows() == {"left": 0, "right": 0}


def test_state_stays_bounded_over_a_long_stream():
    rng = random.Random(1)
    op = make_join("left", (-3, 2))
    most = 0
    for second in range(0, 150):
        t = second * SECOND
        op.process_batch(rows(LEFT, [t, t], [rng.randrange(5), rng.randrange(5)], [second, second]), 0)
        op.process_batch(rows(RIGHT, [t], [rng.randrange(5)], [f"w{second}"]), 1)
        op.process_watermark(t - 1)
        most = max(most, sum(op.state_rows().values()))
    assert most <= 2 * 4 + 4, f"state grew to {most} rows over 150 s of input"


def test_outer_row_is_padded_when_the_watermark_passes_its_bound():
    op = make_join("left", (0, 5))
    assert op.process_batch(rows(LEFT, [10 * SECOND], [1], [7]), 0) == []
    assert op.process_watermark(15 * SECOND - 1) == []
    out = result(op.process_watermark(15 * SECOND))
    assert [(r[1], r[3]) for r in out] == [(7, None)]
    assert op.output_watermark(15 * SECOND) == 10 * SECOND, "held back by the larger bound"


def test_late_row_is_joined_with_what_is_buffered():
    op = make_join("inner", (-10, 10))
    op.process_batch(rows(LEFT, [10 * SECOND], [1], [7]), 0)
    op.process_watermark(12 * SECOND)
    out = result(op.process_batch(rows(RIGHT, [11 * SECOND], [1], ["late"]), 1))
    assert [(r[1], r[4]) for r in out] == [(7, "late")]
    assert op.ctx.metrics["late_rows_joined"] == 1


@given(seed=st.integers(0, 10_000), max_batch=st.integers(1, 30), join_type=st.sampled_from(JOIN_TYPES),
       bounds=st.sampled_from(BOUNDS), restore_at=st.floats(0, 1), parallelism=st.sampled_from([1, 2, 3]))
@settings(max_examples=30, deadline=None)
def test_batching_interleaving_and_restore_never_change_the_result(seed, max_batch, join_type, bounds,
                                                                     restore_at, parallelism):
    rng = random.Random(seed)
    left, right = random_side(rng, LEFT, rng.randint(0, 50)), random_side(rng, RIGHT, rng.randint(0, 50))
    steps = interleave(rng, left, right, max_batch)
    cut = int(len(steps) * restore_at)
    first = Driver([make_join(join_type, bounds)])
    for index, item in steps[:cut]:
        first.step(index, item)
    snapshot = IntervalJoin.merge_snapshots([first.ops[0].snapshot()])
    restored = [make_join(join_type, bounds, subtask=i, parallelism=parallelism) for i in range(parallelism)]
    for op in restored:
        op.restore(snapshot)
    second = Driver(restored)
    second.watermarks = list(first.watermarks)
    for index, item in steps[cut:]:
        second.step(index, item)
    second.finish()
    assert result(first.out + second.out) == oracle(join_type, pa.table(left), pa.table(right), bounds)


def test_snapshots_of_subtasks_merge_into_one():
    rng = random.Random(3)
    left, right = random_side(rng, LEFT, 50), random_side(rng, RIGHT, 50)
    subtasks = Driver([make_join("full", subtask=i, parallelism=2) for i in range(2)])
    subtasks.step(0, left)
    merged = IntervalJoin.merge_snapshots([op.snapshot() for op in subtasks.ops])
    one = make_join("full")
    one.restore(merged)
    out = one.process_batch(right, 1) + one.process_watermark(MAX_WATERMARK)
    assert result(subtasks.out + out) == oracle("full", pa.table(left), pa.table(right), (-3, 2))


def test_restore_refuses_another_max_parallelism_and_version():
    snap = make_join("inner").snapshot()
    op = IntervalJoin(make_join("inner").config, OperatorContext("join", OUTPUT, max_parallelism=8))
    with pytest.raises(EngineError, match="max parallelism 16"):
        op.restore(snap)
    with pytest.raises(EngineError, match="version"):
        make_join("inner").restore({**snap, "version": 99})


def test_config_errors_name_the_problem():
    ctx = OperatorContext("join", OUTPUT)
    config = {"lower": 0, "upper": 1, "left": side_config(LEFT), "right": side_config(RIGHT)}
    with pytest.raises(EngineError, match="unknown interval join type 'cross'"):
        IntervalJoin({**config, "join_type": "cross"}, ctx)
    with pytest.raises(EngineError, match="bounds are empty"):
        IntervalJoin({**config, "join_type": "inner", "lower": 5}, ctx)
    with pytest.raises(EngineError, match="nope"):
        IntervalJoin({**config, "join_type": "inner", "right": {**side_config(RIGHT), "time": "nope"}}, ctx)

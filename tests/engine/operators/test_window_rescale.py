"""Window state restored at another parallelism: merged from several subtasks or split by
key-group ranges, the output equals one operator that saw everything."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.errors import EngineError
from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.window_aggregate import WindowAggregate
from weir.engine.state.key_groups import key_groups, partition, range_for_subtask
from weir.engine.state.keyed_tables import select_key_groups
from window_harness import SECOND, drive, drive_to_end, make_window_op, timestamps, to_rows

MAX_P = 16
SCHEMA = pa.schema([
    ("auction", pa.int64()), ("window_start", pa.timestamp("us")), ("n", pa.int64()),
    ("total", pa.int64()), ("bidders", pa.int64()),
])
CONFIG = {
    "window": {"kind": "tumble", "time_column": "date_time", "size": 10 * SECOND, "offset": 0},
    "keys": [["auction", '"auction"']],
    "aggregates": [
        {"name": "n", "function": "count", "argument": None},
        {"name": "total", "function": "sum", "argument": "price"},
        {"name": "bidders", "function": "count", "argument": "bidder", "distinct": True},
    ],
    "having": None,
    "projection": [["auction", "auction"], ["window_start", "window_start"], ["n", "n"],
                   ["total", "total"], ["bidders", "bidders"]],
}


def stream(batches: int = 40) -> list[pa.RecordBatch | int]:
    """Batches of bids on 23 auctions (one NULL), out of order, with a watermark every 3rd."""
    steps: list[pa.RecordBatch | int] = []
    for i in range(batches):
        n = 9
        steps.append(pa.RecordBatch.from_pydict({
            "auction": pa.array([None if (i + j) % 23 == 0 else (i * 7 + j * 5) % 23 for j in range(n)],
                                pa.int64()),
            "price": pa.array([i * 10 + j for j in range(n)], pa.int64()),
            "bidder": pa.array([(i + j) % 6 for j in range(n)], pa.int64()),
            "date_time": timestamps([i * 600_000 + (j * 370_000) % 2_000_000 for j in range(n)]),
        }))
        if i % 3 == 2:
            steps.append(i * 600_000 - 2 * SECOND)
    return steps


def subtask_op(i: int, p: int) -> WindowAggregate:
    return make_window_op(CONFIG, SCHEMA, subtask_index=i, parallelism=p, max_parallelism=MAX_P)


def run_parallel(ops: list[WindowAggregate], steps, *, to_end: bool) -> list[pa.RecordBatch]:
    """Every batch partitioned by key over ``ops``; every watermark to all of them."""
    out: list[pa.RecordBatch] = []
    for step in steps:
        if isinstance(step, int):
            for op in ops:
                out += op.process_watermark(step)
        else:
            for op, part in zip(ops, partition(step, ["auction"], len(ops), MAX_P)):
                out += drive(op, [part]) if part.num_rows else []
    if to_end:
        for op in ops:
            out += drive_to_end(op, [])
    return out


def rows(batches) -> list[tuple]:
    return sorted(
        (tuple((v is not None, v) for v in r.values()) for r in to_rows(batches, SCHEMA)),
    )


STEPS = stream()
STRAIGHT = rows(run_parallel([subtask_op(0, 1)], STEPS, to_end=True))


def test_the_stream_fires_windows_before_and_after_every_cut():
    assert len(STRAIGHT) > 60
    assert any(r[0] == (False, None) for r in STRAIGHT)  # the NULL key takes part


@pytest.mark.parametrize("cut", [0, 5, 17, 30, len(STEPS)])
def test_two_subtasks_merged_into_one_continue_like_one_operator(cut):
    before_ops = [subtask_op(i, 2) for i in range(2)]
    before = run_parallel(before_ops, STEPS[:cut], to_end=False)
    snapshots = [op.snapshot() for op in before_ops]
    # each subtask holds only the key groups it owns
    for i, snap in enumerate(snapshots):
        for table in snap["tables"].values():
            assert set(table.column("key_group").to_pylist()) <= set(range_for_subtask(i, 2, MAX_P))
    merged = WindowAggregate.merge_snapshots(snapshots)
    resumed = subtask_op(0, 1)
    resumed.restore(merged)
    after = run_parallel([resumed], STEPS[cut:], to_end=True)
    assert rows(before + after) == STRAIGHT


@pytest.mark.parametrize("cut", [0, 8, 21, len(STEPS)])
def test_one_snapshot_split_by_key_group_ranges_into_two(cut):
    first = subtask_op(0, 1)
    before = run_parallel([first], STEPS[:cut], to_end=False)
    snap = first.snapshot()
    resumed = []
    for i in range(2):
        owned = range_for_subtask(i, 2, MAX_P)
        part = dict(snap, tables={name: select_key_groups(t, owned) for name, t in snap["tables"].items()})
        op = subtask_op(i, 2)
        op.restore(part)
        resumed.append(op)
    after = run_parallel(resumed, STEPS[cut:], to_end=True)
    assert rows(before + after) == STRAIGHT


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, len(STEPS)))
def test_any_parallelism_to_any_parallelism_at_any_cut(p_before, p_after, cut):
    before_ops = [subtask_op(i, p_before) for i in range(p_before)]
    before = run_parallel(before_ops, STEPS[:cut], to_end=False)
    merged = WindowAggregate.merge_snapshots([op.snapshot() for op in before_ops])
    after_ops = [subtask_op(i, p_after) for i in range(p_after)]
    for op in after_ops:
        op.restore(merged)  # each keeps the key groups it owns
    after = run_parallel(after_ops, STEPS[cut:], to_end=True)
    assert rows(before + after) == STRAIGHT


def test_snapshot_key_groups_are_the_stable_key_groups_of_the_keys():
    op = subtask_op(0, 1)
    drive(op, [STEPS[0], STEPS[1]])
    for table in op.snapshot()["tables"].values():
        keys = pa.table({"k": table.column("__k0")})
        assert table.column("key_group").to_pylist() == key_groups(keys, ["k"], MAX_P).to_pylist()


def test_key_expressions_get_the_key_groups_of_their_values():
    config = dict(CONFIG, keys=[["auction", "auction % 5"]])
    op = make_window_op(config, SCHEMA, max_parallelism=MAX_P)
    drive(op, [STEPS[0]])
    table = op.snapshot()["tables"]["window_accumulators"]
    values = pa.table({"k": table.column("__k0")})
    assert table.column("key_group").to_pylist() == key_groups(values, ["k"], MAX_P).to_pylist()
    assert set(table.column("__k0").to_pylist()) <= {None, 0, 1, 2, 3, 4}


def test_merging_takes_the_lowest_watermark_and_every_table():
    a, b = subtask_op(0, 2), subtask_op(1, 2)
    assert WindowAggregate.merge_snapshots([a.snapshot(), b.snapshot()])["watermark"] == MIN_WATERMARK
    a.process_watermark(5 * SECOND)
    b.process_watermark(3 * SECOND)
    parts = partition(STEPS[0], ["auction"], 2, MAX_P)
    drive(a, [parts[0]])
    merged = WindowAggregate.merge_snapshots([a.snapshot(), b.snapshot()])
    assert merged["watermark"] == 3 * SECOND
    assert merged["max_parallelism"] == MAX_P
    assert set(merged["tables"]) == {"window_accumulators", "distinct_values_0"}


def test_restore_refuses_state_of_another_max_parallelism():
    op = subtask_op(0, 1)
    drive(op, [STEPS[0]])
    other = make_window_op(CONFIG, SCHEMA, max_parallelism=32)
    with pytest.raises(EngineError, match="max parallelism 16, this job has 32") as info:
        other.restore(op.snapshot())
    assert info.value.operator_id == "window"
    with pytest.raises(EngineError, match="different max parallelism"):
        WindowAggregate.merge_snapshots([op.snapshot(), other.snapshot()])


def test_restore_refuses_key_groups_outside_max_parallelism():
    op = subtask_op(0, 1)
    drive(op, [STEPS[0]])
    snap = op.snapshot()
    del snap["max_parallelism"]  # a snapshot that does not say
    small = make_window_op(CONFIG, SCHEMA, max_parallelism=4)
    with pytest.raises(EngineError, match=r"outside \[0, 4\)") as info:
        small.restore(snap)
    assert info.value.operator_id == "window"

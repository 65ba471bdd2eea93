"""State written at one parallelism, read back by key-group ranges at another."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.checkpoint.state_files import filter_key_groups
from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.window_aggregate import WindowAggregate
from weir.engine.state.key_groups import range_for_subtask
from state_builders import MAX_PARALLELISM, rows, window_snapshot

OP = "auction_counts.window_aggregate"


def write_at_parallelism(storage: CheckpointStorage, parallelism: int, groups: list[int]):
    """Split ``groups`` among ``parallelism`` subtasks as the runtime would, write, commit."""
    writer = storage.writer(1)
    originals = []
    for subtask in range(parallelism):
        owned = range_for_subtask(subtask, parallelism, MAX_PARALLELISM)
        mine = [g for g in groups if g in owned]
        snapshot = window_snapshot(mine, watermark=100 + subtask, offset=1000 * subtask)
        writer.write_state(OP, subtask, snapshot)
        originals.append(snapshot)
    writer.commit({})
    return storage.latest(), originals


@pytest.mark.parametrize("old, new", [(2, 1), (2, 3), (3, 2), (1, 4), (4, 4)])
def test_every_row_lands_in_exactly_one_new_subtask(tmp_path, old, new):
    groups = [g for g in range(MAX_PARALLELISM) for _ in range(g % 3)]
    checkpoint, originals = write_at_parallelism(CheckpointStorage(tmp_path), old, groups)
    for table in ("window_accumulators", "distinct_values_0"):
        original = rows(pa.concat_tables(s["tables"][table] for s in originals))
        restored = []
        for subtask in range(new):
            owned = range_for_subtask(subtask, new, MAX_PARALLELISM)
            states = checkpoint.operator_state(OP, owned)
            assert [s["watermark"] for s in states] == [100 + i for i in range(old)]  # all subtasks
            for state in states:
                part = state["tables"][table]
                assert part.schema == originals[0]["tables"][table].schema
                assert set(part.column("key_group").to_pylist()) <= set(owned)
                restored += rows(part)
        assert sorted(restored) == original  # the union, and no row twice


def test_a_range_outside_a_subtasks_key_groups_reads_only_the_schema(tmp_path, monkeypatch):
    from weir.engine.checkpoint import state_files

    checkpoint, _ = write_at_parallelism(CheckpointStorage(tmp_path), 2, list(range(128)))
    read = []
    original = state_files.read_verified
    monkeypatch.setattr(state_files, "read_verified", lambda root, entry: read.append(entry["path"]) or original(root, entry))
    states = checkpoint.operator_state(OP, range(0, 10))
    assert [s["tables"]["window_accumulators"].num_rows for s in states] == [10, 0]
    assert not any("subtask-1" in path and path.endswith(".parquet") for path in read)


@settings(max_examples=60, deadline=None)
@given(
    groups=st.lists(st.integers(0, 31), max_size=200),
    cuts=st.lists(st.integers(0, 32), max_size=5),
    int32=st.booleans(),
)
def test_filtering_by_any_ranges_partitions_the_rows(groups, cuts, int32):
    table = pa.table({
        "key_group": pa.array(sorted(groups), pa.int32() if int32 else pa.int64()),
        "row": pa.array(range(len(groups))),
    })
    bounds = sorted({0, 32, *cuts})
    parts = [filter_key_groups(table, range(a, b)) for a, b in zip(bounds, bounds[1:])]
    assert pa.concat_tables(parts).equals(table)
    stepped = filter_key_groups(table, range(1, 32, 3))
    assert stepped.column("key_group").to_pylist() == [g for g in sorted(groups) if g % 3 == 1]


# -- a real window aggregate, checkpointed at parallelism 1 and resumed at 3 ------

SECOND = 1_000_000
CONFIG = {
    "window": {"kind": "tumble", "time_column": "date_time", "size": 10 * SECOND, "offset": 0},
    "keys": [["auction", "auction"]],
    "aggregates": [
        {"name": "n", "function": "count", "argument": None},
        {"name": "total", "function": "sum", "argument": "price"},
        {"name": "bidders", "function": "count", "argument": "bidder", "distinct": True},
    ],
    "having": None,
    "projection": [["auction", "auction"], ["window_end", "window_end"], ["n", "n"],
                   ["total", "total"], ["bidders", "bidders"]],
}
SCHEMA = pa.schema([("auction", pa.int64()), ("window_end", pa.timestamp("us")), ("n", pa.int64()),
                    ("total", pa.int64()), ("bidders", pa.int64())])


def window_op(subtask: int = 0, parallelism: int = 1) -> WindowAggregate:
    op = WindowAggregate(CONFIG, OperatorContext(OP, SCHEMA, subtask_index=subtask, parallelism=parallelism))
    op.open()
    return op


def bids(start: int, n: int) -> pa.RecordBatch:
    return pa.record_batch({
        "auction": pa.array([(start + i) % 97 for i in range(n)], pa.int64()),
        "price": pa.array([(start + i) % 13 for i in range(n)], pa.int64()),
        "bidder": pa.array([(start + i) % 7 for i in range(n)], pa.int64()),
        "date_time": pa.array([(start + i) * 50_000 for i in range(n)], pa.timestamp("us")),
    })


def run(op: WindowAggregate, steps) -> list[dict]:
    out = []
    for step in steps:
        out += op.process_watermark(step) if isinstance(step, int) else op.process_batch(step)
    return [r for b in out for r in pa.Table.from_batches([b]).to_pylist()]


def test_window_state_checkpointed_at_parallelism_1_resumes_at_3(tmp_path):
    before = [bids(0, 300), 5 * SECOND, bids(300, 300), 12 * SECOND]
    after = [bids(600, 300), MAX_WATERMARK]
    straight = run(window_op(), before + after)

    first = window_op()
    emitted = run(first, before)
    storage = CheckpointStorage(tmp_path / "checkpoints")
    writer = storage.writer(1)
    writer.write_state(OP, 0, first.snapshot())
    writer.commit({})
    checkpoint = storage.latest()

    snapshot_table = first.snapshot()["tables"]["window_accumulators"]
    group_of = dict(zip(snapshot_table.column("__k0").to_pylist(), snapshot_table.column("key_group").to_pylist()))
    resumed = []
    for subtask in range(3):
        owned = range_for_subtask(subtask, 3, MAX_PARALLELISM)
        (state,) = checkpoint.operator_state(OP, owned)
        op = window_op(subtask, 3)
        op.restore(state)
        batches = [s if isinstance(s, int) else _owned_rows(s, group_of, owned) for s in after]
        resumed += run(op, batches)
    key = lambda r: (r["window_end"], r["auction"])  # noqa: E731
    assert sorted(emitted + resumed, key=key) == sorted(straight, key=key)
    assert len(resumed) > 0 and len(emitted) > 0


def _owned_rows(batch: pa.RecordBatch, group_of: dict[int, int], owned: range) -> pa.RecordBatch:
    """The rows whose key's group (as the operator's own state records it) is in ``owned``."""
    groups = [group_of[auction] for auction in batch.column("auction").to_pylist()]
    return batch.filter(pa.array([g in owned for g in groups]))

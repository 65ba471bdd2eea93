"""Restoring streams a snapshot's files into the operator's DuckDB state: only the row groups
of the key groups the subtask owns are decoded, one bounded batch at a time, and rescaling
(two snapshots restored at one subtask, one snapshot restored at three) stays exact."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from weir.engine.checkpoint.state_files import read_subtask_state, write_subtask_state
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators import duckdb_sql
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.window_aggregate import WindowAggregate
from weir.engine.state import restored
from weir.engine.state.key_groups import key_groups, range_for_subtask, subtask_for_key_group
from weir.engine.state.restored import RestoredTable
from restores import record_restore_batches
from tests.engine.state.test_bounded_arrow import CONFIG, SCHEMA, events, expected

KEYS = 600
TABLE = "window_accumulators"


def window_op(subtask: int = 0, parallelism: int = 1, spill_dir=None) -> WindowAggregate:
    ctx = OperatorContext("q.window", SCHEMA, subtask_index=subtask, parallelism=parallelism,
                          spill_dir=str(spill_dir) if spill_dir else None, state_backend="memory")
    op = WindowAggregate(CONFIG, ctx)
    op.open()
    return op


def fired(op: WindowAggregate) -> list[dict]:
    return pa.Table.from_batches(list(op.process_watermark(MAX_WATERMARK)), SCHEMA).to_pylist()


@pytest.fixture
def small_batches(monkeypatch):
    """Snapshots staged in 32-row row groups, restored in 16-row batches: many of each."""
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 32)
    monkeypatch.setattr(restored, "RESTORE_BATCH_ROWS", 16)
    return record_restore_batches(monkeypatch)


def checkpoint_of(tmp_path, parallelism: int) -> list[tuple[dict, dict]]:
    """KEYS keys of open window state taken at ``parallelism`` subtasks, written as a checkpoint:
    (handle, the state's table rows by key group) per old subtask."""
    written = []
    for subtask in range(parallelism):
        op = window_op(subtask, parallelism, tmp_path / f"spill-{subtask}")
        batch = events(KEYS)
        owners = pc.equal(pc.take(pa.array([subtask_for_key_group(g, parallelism, 128) for g in range(128)]),
                                  key_groups(batch, ["k"], 128)), subtask)
        op.process_batch(batch.filter(owners))  # the rows of the keys the subtask owns, as an exchange sends
        state = op.snapshot()
        op.close()
        written.append(write_subtask_state(tmp_path / "chk-1", "q.window", subtask, state))
    return written


def test_a_subtask_reads_only_the_row_groups_of_its_key_groups_in_bounded_batches(tmp_path, small_batches):
    (handle,) = checkpoint_of(tmp_path, 1)
    everything = read_subtask_state(tmp_path / "chk-1", handle, None)["tables"][TABLE]
    rows_of_group = {g: 0 for g in range(128)}
    for g in everything.column("key_group").to_pylist():
        rows_of_group[g] += 1
    outputs = []
    for subtask in range(3):
        owned = range_for_subtask(subtask, 3, 128)
        state = read_subtask_state(tmp_path / "chk-1", handle, owned, stream=True)
        table = state["tables"][TABLE]
        assert isinstance(table, RestoredTable) and table.scanned == 0, "nothing is read before the restore"
        op = window_op(subtask, 3)
        small_batches.clear()
        op.restore(state)
        owned_rows = sum(rows_of_group[g] for g in owned)
        # Only row groups overlapping the owned key groups were decoded: at most one 32-row group
        # at either end holds rows of other key groups.
        assert owned_rows <= table.scanned <= owned_rows + 2 * 32
        assert table.scanned < everything.num_rows / 2
        assert small_batches and max(small_batches) <= 16
        assert table.num_rows == owned_rows
        outputs += fired(op)
    assert sorted(outputs, key=lambda r: r["k"]) == expected(KEYS)


def test_two_snapshots_merge_into_one_subtask_without_being_read_whole(tmp_path, small_batches):
    handles = checkpoint_of(tmp_path, 2)
    states = [read_subtask_state(tmp_path / "chk-1", h, None, stream=True) for h in handles]
    merged = WindowAggregate.merge_snapshots(states)
    assert isinstance(merged["tables"][TABLE], RestoredTable)
    op = window_op()
    small_batches.clear()
    op.restore(merged)
    assert max(small_batches) <= 16
    assert sorted(fired(op), key=lambda r: r["k"]) == expected(KEYS)


@pytest.mark.parametrize(("batch_rows", "subtask", "parallelism"), [(1, 1, 2), (7, 0, 3), (65_536, 2, 5)])
def test_a_streamed_restore_gives_what_an_arrow_restore_gives(tmp_path, monkeypatch, batch_rows, subtask,
                                                              parallelism):
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 50)  # staged in 50-row row groups
    monkeypatch.setattr(restored, "RESTORE_BATCH_ROWS", batch_rows)
    (handle,) = checkpoint_of(tmp_path, 1)
    owned = range_for_subtask(subtask, parallelism, 128)
    streamed, whole = window_op(subtask, parallelism), window_op(subtask, parallelism)
    streamed.restore(read_subtask_state(tmp_path / "chk-1", handle, owned, stream=True))
    whole.restore(read_subtask_state(tmp_path / "chk-1", handle, owned))
    assert fired(streamed) == fired(whole) != []


def test_files_of_several_subtasks_merge_in_key_group_order_with_their_types_unified(tmp_path):
    """As ``pa.concat_tables(promote_options="default")`` merges Arrow snapshots: a column
    of nulls only (type null) in one file takes the other's type."""
    later = pa.table({"key_group": pa.array([70, 71, 90], pa.int32()), "a": pa.array([7, 8, 9], pa.int64())})
    earlier = pa.table({"key_group": pa.array([3, 5], pa.int32()), "a": pa.nulls(2)})
    parts = []
    for name, table in (("later", later), ("earlier", earlier)):
        pq.write_table(table, tmp_path / f"{name}.parquet", row_group_size=1)
        groups = table.column("key_group").to_pylist()
        parts.append(RestoredTable([restored.Part(str(tmp_path / f"{name}.parquet"), (groups[0], groups[-1]))],
                                   table.schema).select(range(0, 80)))
    merged = RestoredTable.concat(parts)
    assert merged.schema.field("a").type == pa.int64()
    assert merged.read().to_pylist() == [{"key_group": 3, "a": None}, {"key_group": 5, "a": None},
                                         {"key_group": 70, "a": 7}, {"key_group": 71, "a": 8}]
    assert merged.scanned == 4, "the row group of key group 90 was skipped by its statistics"

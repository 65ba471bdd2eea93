"""Checkpoint storage: round trips, metadata written last, retention, savepoints, threads."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from weir.engine.checkpoint.storage import Checkpoint, CheckpointError, CheckpointStorage
from state_builders import window_snapshot

OP = "auction_counts.window_aggregate"


def complete(storage: CheckpointStorage, checkpoint_id: int, **writer_args) -> Checkpoint:
    writer = storage.writer(checkpoint_id, **writer_args)
    writer.write_state(OP, 0, window_snapshot([0, 5, 5, 9], watermark=checkpoint_id))
    info = writer.commit({"sources": {"bids": {"0": checkpoint_id * 100}}})
    return CheckpointStorage.open(info.path)


@pytest.fixture
def storage(tmp_path: Path) -> CheckpointStorage:
    return CheckpointStorage(tmp_path / "job" / "checkpoints")


# -- round trip ----------------------------------------------------------------

def test_a_snapshot_comes_back_equal_with_its_json_parts_and_metadata(storage):
    snapshots = [window_snapshot([3, 1, 1, 64, 127, 0], watermark=7),
                 window_snapshot([90, 2], watermark=None, offset=100)]
    snapshots[0]["splits"] = {"file-a": [1, 2], "nested": {"x": 1.5, "ok": True}}
    writer = storage.writer(7)
    for subtask, snapshot in enumerate(snapshots):
        handle = writer.write_state(OP, subtask, snapshot)
        json.dumps(handle)  # JSON-able, to go into the coordinator's metadata
        assert {f["path"] for f in handle["files"]} >= {t["path"] for t in handle["tables"].values()}
        assert all(not Path(f["path"]).is_absolute() for f in handle["files"])
    writer.write_state("bids.source", 0, None)
    writer.write_state("print.sink", 0, {"pending": ["a", "b"]})
    info = writer.commit({"sources": {"bids": {"0": 1234}}, "fingerprint": "abc"})

    assert (info.id, info.kind, info.path) == (7, "checkpoint", storage.directory / "chk-7")
    checkpoint = storage.latest()
    assert (checkpoint.id, checkpoint.kind, checkpoint.path) == (7, "checkpoint", info.path)
    assert checkpoint.metadata == {"sources": {"bids": {"0": 1234}}, "fingerprint": "abc"}
    assert checkpoint.size_bytes == info.size_bytes > 0
    assert sorted(checkpoint.operator_ids) == sorted([OP, "bids.source", "print.sink"])
    assert checkpoint.parallelism(OP) == 2
    restored = checkpoint.operator_state(OP)
    for original, back in zip(snapshots, restored, strict=True):
        assert back.keys() == original.keys()
        assert {k: v for k, v in back.items() if k != "tables"} == {
            k: v for k, v in original.items() if k != "tables"}
        for name, table in original["tables"].items():
            expected = table.sort_by([("key_group", "ascending")])  # stable: ties keep their order
            assert back["tables"][name].equals(expected), name
            assert back["tables"][name].schema == table.schema
    assert checkpoint.operator_state("bids.source") == [None]
    assert checkpoint.operator_state("print.sink") == [{"pending": ["a", "b"]}]
    assert checkpoint.operator_state("an.operator.added.later") == []


def test_the_layout_on_disk(storage):
    info = complete(storage, 3).info
    files = sorted(str(p.relative_to(info.path)) for p in info.path.rglob("*") if p.is_file())
    assert files == [
        "_metadata",
        f"{OP}/subtask-0/distinct_values_0.parquet",
        f"{OP}/subtask-0/state.json",
        f"{OP}/subtask-0/window_accumulators.parquet",
    ]
    record = json.loads((info.path / "_metadata").read_text())
    assert record["format_version"] == 1 and record["kind"] == "checkpoint"
    assert record["checkpoint_id"] == 3 and record["size_bytes"] == info.size_bytes
    handle = record["operators"][OP]["0"]
    assert handle["tables"]["window_accumulators"]["key_groups"] == [0, 9]
    assert handle["tables"]["window_accumulators"]["rows"] == 4


def test_tables_are_stored_sorted_by_key_group_whatever_order_they_came_in(storage):
    writer = storage.writer(1)
    snapshot = window_snapshot([9, 3, 3, 0, 7])
    writer.write_state(OP, 0, snapshot)
    writer.commit({})
    table = storage.latest().operator_state(OP)[0]["tables"]["window_accumulators"]
    assert table.column("key_group").to_pylist() == [0, 3, 3, 7, 9]
    assert table.column("__k0").to_pylist() == ["key-3", "key-1", "key-2", "key-4", "key-0"]


def test_operator_and_table_names_are_made_safe_as_file_names(storage):
    writer = storage.writer(1)
    odd = "../evil/op id"
    writer.write_state(odd, 0, {"tables": {"a/b": pa.table({"key_group": [1]}), "a_b": pa.table({"key_group": [2]})}})
    info = writer.commit({})
    assert all(info.path in p.parents for p in info.path.rglob("*"))
    state = storage.latest().operator_state(odd)[0]
    assert state["tables"]["a/b"].column("key_group").to_pylist() == [1]
    assert state["tables"]["a_b"].column("key_group").to_pylist() == [2]


def test_an_empty_table_and_an_empty_job_round_trip(storage):
    writer = storage.writer(1)
    empty = pa.table({"key_group": pa.array([], pa.int64()), "v": pa.array([], pa.string())})
    writer.write_state(OP, 0, {"tables": {"window_accumulators": empty}})
    writer.commit({})
    back = storage.latest().operator_state(OP)[0]["tables"]["window_accumulators"]
    assert back.num_rows == 0 and back.schema == empty.schema
    info = storage.writer(2).commit({"nothing": True})
    assert storage.latest().id == info.id == 2


# -- the metadata is written last ------------------------------------------------

def test_a_checkpoint_without_commit_does_not_exist_and_is_discarded(storage):
    complete(storage, 1)
    writer = storage.writer(2)
    writer.write_state(OP, 0, window_snapshot([1, 2]))  # then the process dies
    assert [c.id for c in storage.completed()] == [1]
    assert storage.latest().id == 1
    assert (storage.directory / "chk-2").is_dir()
    storage.discard_incomplete()
    assert not (storage.directory / "chk-2").exists()
    assert [c.id for c in storage.completed()] == [1]


def test_a_leftover_temporary_metadata_file_does_not_count(storage):
    complete(storage, 1)
    writer = storage.writer(2)
    writer.write_state(OP, 0, window_snapshot([1]))
    (writer.path / "_metadata.tmp").write_text("{")  # died between write and rename
    assert storage.latest().id == 1
    storage.discard_incomplete()
    assert sorted(p.name for p in storage.directory.iterdir()) == ["chk-1"]


def test_abort_removes_the_partial_checkpoint(storage):
    writer = storage.writer(5)
    writer.write_state(OP, 0, window_snapshot([1, 2]))
    writer.abort()
    assert not writer.path.exists()
    assert storage.latest() is None
    with pytest.raises(CheckpointError, match="already aborted"):
        writer.write_state(OP, 1, window_snapshot([3]))


def test_a_crashed_attempt_at_the_same_id_is_replaced_but_a_completed_one_is_refused(storage):
    stale = storage.writer(4)
    stale.write_state(OP, 0, window_snapshot([1]))
    writer = storage.writer(4)  # after a restart
    writer.write_state(OP, 0, window_snapshot([2]))
    writer.commit({})
    assert storage.latest().operator_state(OP)[0]["tables"]["window_accumulators"].column(
        "key_group").to_pylist() == [2]
    with pytest.raises(CheckpointError, match="checkpoint 4 .* already exists"):
        storage.writer(4)


def test_a_committed_writer_accepts_nothing_more(storage):
    writer = storage.writer(1)
    writer.commit({})
    with pytest.raises(CheckpointError, match="already committed"):
        writer.commit({})
    with pytest.raises(CheckpointError, match="already committed"):
        writer.write_state(OP, 0, {})
    writer.abort()  # nothing to do after a commit
    assert storage.latest().id == 1


def test_state_that_cannot_be_stored_names_the_operator(storage):
    writer = storage.writer(1)
    with pytest.raises(CheckpointError, match="no 'key_group' column") as e:
        writer.write_state(OP, 0, {"tables": {"window_accumulators": pa.table({"x": [1]})}})
    assert e.value.operator_id == OP
    with pytest.raises(CheckpointError, match="not JSON-able"):
        writer.write_state(OP, 1, {"watermark": object()})
    with pytest.raises(CheckpointError, match="non-null integer"):
        writer.write_state(OP, 2, {"tables": {"t": pa.table({"key_group": [1, None]})}})
    writer.write_state(OP, 3, {})
    with pytest.raises(CheckpointError, match="written twice"):
        writer.write_state(OP, 3, {})
    with pytest.raises(CheckpointError, match="metadata .* not JSON-able"):
        writer.commit({"offset": {1, 2}})
    writer.commit({"offset": 1})  # the writer is still usable after a refused commit


# -- retention -------------------------------------------------------------------

def test_only_the_newest_retained_checkpoints_are_kept_and_savepoints_are_untouched(tmp_path):
    storage = CheckpointStorage(tmp_path / "job" / "checkpoints", retained=3)
    savepoint = complete(storage, 1, kind="savepoint")
    chosen = complete(storage, 2, kind="savepoint", path=tmp_path / "mine")
    for checkpoint_id in (1, 2, 3, 4):
        complete(storage, checkpoint_id)
    assert [c.id for c in storage.completed()] == [4, 3, 2]
    assert sorted(p.name for p in storage.directory.iterdir()) == ["chk-2", "chk-3", "chk-4"]
    assert savepoint.path == tmp_path / "job" / "savepoints" / "sp-1"
    for sp in (savepoint, chosen):
        reopened = storage.open(sp.path)
        assert (reopened.kind, reopened.id) == ("savepoint", sp.id)
        assert reopened.operator_state(OP)[0]["watermark"] == sp.id
    complete(storage, 5)
    assert [c.id for c in storage.completed()] == [5, 4, 3]


def test_retention_leaves_incomplete_checkpoints_to_discard_incomplete(tmp_path):
    storage = CheckpointStorage(tmp_path / "checkpoints", retained=1)
    complete(storage, 1)
    in_flight = storage.writer(3)
    complete(storage, 2)
    assert [c.id for c in storage.completed()] == [2]
    assert in_flight.path.is_dir()  # a concurrent checkpoint may still be writing
    in_flight.commit({})
    assert [c.id for c in storage.completed()] == [3]


def test_retained_must_be_positive(tmp_path):
    with pytest.raises(ValueError):
        CheckpointStorage(tmp_path, retained=0)


# -- savepoints --------------------------------------------------------------------

def test_a_savepoint_refuses_a_directory_that_holds_something(storage, tmp_path):
    target = tmp_path / "sp"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(CheckpointError, match="not an empty directory") as e:
        storage.writer(1, kind="savepoint", path=target)
    assert e.value.hint
    assert (target / "notes.txt").read_text() == "mine"


def test_aborting_a_savepoint_in_an_empty_directory_keeps_the_directory(storage, tmp_path):
    target = tmp_path / "sp"
    target.mkdir()
    writer = storage.writer(1, kind="savepoint", path=target)
    writer.write_state(OP, 0, window_snapshot([1]))
    writer.abort()
    assert target.is_dir() and list(target.iterdir()) == []


def test_open_accepts_the_metadata_file_too(storage):
    checkpoint = complete(storage, 8)
    assert CheckpointStorage.open(checkpoint.path / "_metadata").id == 8


def test_a_savepoint_is_not_a_checkpoint_of_the_job(storage):
    complete(storage, 9, kind="savepoint")
    assert storage.completed() == [] and storage.latest() is None


# -- threads -----------------------------------------------------------------------

def test_subtasks_write_their_state_concurrently(storage):
    writer = storage.writer(1)
    snapshots = {(op, s): window_snapshot([(s * 13 + i) % 128 for i in range(500)], watermark=s, offset=s)
                 for op in ("a.window_aggregate", "b.window_aggregate") for s in range(8)}
    barrier = threading.Barrier(len(snapshots))
    errors = []

    def write(key):
        try:
            barrier.wait()
            writer.write_state(*key, snapshots[key])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(key,)) for key in snapshots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    writer.commit({})
    checkpoint = storage.latest()
    for op in ("a.window_aggregate", "b.window_aggregate"):
        states = checkpoint.operator_state(op)
        assert [s["watermark"] for s in states] == list(range(8))
        for subtask, state in enumerate(states):
            expected = snapshots[(op, subtask)]["tables"]["window_accumulators"]
            assert state["tables"]["window_accumulators"].equals(
                expected.sort_by([("key_group", "ascending")]))


def test_commit_refuses_while_a_state_write_is_still_running(storage, monkeypatch):
    from weir.engine.checkpoint import writer as writer_module

    writer = storage.writer(1)
    inside, release = threading.Event(), threading.Event()
    original = writer_module.write_subtask_state

    def slow(*args):
        inside.set()
        release.wait()
        return original(*args)

    monkeypatch.setattr(writer_module, "write_subtask_state", slow)
    thread = threading.Thread(target=writer.write_state, args=(OP, 0, window_snapshot([1])))
    thread.start()
    inside.wait()
    with pytest.raises(CheckpointError, match=f"still writing the state of {OP} subtask 0"):
        writer.commit({})
    release.set()
    thread.join()
    writer.commit({})
    assert storage.latest().parallelism(OP) == 1

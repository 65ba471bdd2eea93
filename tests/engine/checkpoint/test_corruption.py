"""A checkpoint is trusted only if every file its _metadata records is intact.

``latest()`` skips a corrupt newest checkpoint with a warning naming it and the
reason, and uses the one before; ``open()`` refuses a corrupt savepoint."""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Callable

import pytest

from weir.engine.checkpoint.metadata import _canonical
from weir.engine.checkpoint.storage import CheckpointError, CheckpointStorage
from state_builders import window_snapshot

OP = "auction_counts.window_aggregate"
TABLE_FILE = f"{OP}/subtask-1/window_accumulators.parquet"
STATE_FILE = f"{OP}/subtask-0/state.json"


def commit(storage: CheckpointStorage, checkpoint_id: int, **writer_args) -> Path:
    writer = storage.writer(checkpoint_id, **writer_args)
    for subtask in range(2):
        writer.write_state(OP, subtask, window_snapshot(list(range(subtask * 64, subtask * 64 + 40)),
                                                       watermark=checkpoint_id))
    return writer.commit({"sources": {"bids": {"0": checkpoint_id}}}).path


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def garble(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-40] + b"\x00garbage")


def change_an_offset(path: Path) -> None:
    """A change that still parses: only the checksum of _metadata catches it."""
    record = json.loads(path.read_text())
    record["metadata"]["sources"]["bids"]["0"] += 1
    path.write_text(json.dumps(record))


CORRUPTIONS: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "truncated parquet": (TABLE_FILE, truncate, rf"file '{TABLE_FILE}' is \d+ bytes, not \d+ \(truncated\)"),
    "flipped byte in parquet": (TABLE_FILE, flip_a_byte, rf"file '{TABLE_FILE}' does not match its SHA-256"),
    "flipped byte in json": (STATE_FILE, flip_a_byte, rf"file '{STATE_FILE}' does not match its SHA-256"),
    "deleted parquet": (TABLE_FILE, Path.unlink, rf"file '{TABLE_FILE}' is missing"),
    "garbled _metadata": ("_metadata", garble, "_metadata is not valid JSON"),
    "edited _metadata": ("_metadata", change_an_offset, "_metadata does not match its SHA-256"),
    "empty _metadata": ("_metadata", lambda p: p.write_bytes(b""), "_metadata is not valid JSON"),
}


@pytest.fixture
def storage(tmp_path: Path) -> CheckpointStorage:
    return CheckpointStorage(tmp_path / "checkpoints")


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_latest_skips_a_corrupt_newest_checkpoint_with_a_warning(storage, corruption):
    relative, damage, reason = CORRUPTIONS[corruption]
    commit(storage, 1)
    newest = commit(storage, 2)
    damage(newest / relative)
    warnings: list[str] = []
    checkpoint = storage.latest(warn=warnings.append)
    assert checkpoint.id == 1
    assert checkpoint.metadata == {"sources": {"bids": {"0": 1}}}
    assert [s["watermark"] for s in checkpoint.operator_state(OP)] == [1, 1]
    assert len(warnings) == 1
    assert "checkpoint 2" in warnings[0] and str(newest) in warnings[0]
    assert "trying the checkpoint before it" in warnings[0]
    assert re.search(reason, warnings[0]), warnings[0]


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_open_refuses_a_corrupt_savepoint_saying_what_is_wrong(storage, tmp_path, corruption):
    relative, damage, reason = CORRUPTIONS[corruption]
    path = commit(storage, 5, kind="savepoint", path=tmp_path / "my-savepoint")
    damage(path / relative)
    with pytest.raises(CheckpointError, match=reason) as e:
        storage.open(path)
    assert str(path) in e.value.message
    assert e.value.hint and e.value.path == path


def test_open_names_a_directory_that_is_not_a_savepoint(storage, tmp_path):
    with pytest.raises(CheckpointError, match="there is no checkpoint or savepoint at"):
        storage.open(tmp_path / "nowhere")
    (tmp_path / "half").mkdir()
    with pytest.raises(CheckpointError, match="has no _metadata: it was never completed"):
        storage.open(tmp_path / "half")


def test_a_file_damaged_after_latest_verified_it_is_still_caught_when_read(storage):
    path = commit(storage, 1)
    checkpoint = storage.latest()
    flip_a_byte(path / TABLE_FILE)
    with pytest.raises(CheckpointError, match="does not match its SHA-256") as e:
        checkpoint.operator_state(OP)
    assert e.value.operator_id == OP


def test_key_group_filtering_that_skips_a_file_still_checks_its_size(storage):
    path = commit(storage, 1)
    checkpoint = storage.latest()
    truncate(path / TABLE_FILE)
    with pytest.raises(CheckpointError, match="truncated"):
        checkpoint.operator_state(OP, range(0, 10))  # subtask 1's file holds groups 64..103


def test_metadata_pointing_outside_the_checkpoint_is_refused(storage, tmp_path):
    path = commit(storage, 1)
    (tmp_path / "elsewhere").write_text("{}")
    record = json.loads((path / "_metadata").read_text())
    record.pop("sha256")
    record["operators"][OP]["0"]["files"][0]["path"] = "../../elsewhere"
    record["operators"][OP]["0"]["state"] = "../../elsewhere"
    record["sha256"] = hashlib.sha256(_canonical(record)).hexdigest()
    (path / "_metadata").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="outside its directory"):
        storage.open(path)


def test_a_newer_format_version_is_named(storage):
    path = commit(storage, 1)
    record = json.loads((path / "_metadata").read_text())
    record["format_version"] = 99
    (path / "_metadata").write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="format version 99; this weir reads version 1"):
        storage.open(path)


def test_several_corrupt_checkpoints_are_each_skipped(storage):
    commit(storage, 1)
    flip_a_byte(commit(storage, 2) / TABLE_FILE)
    garble(commit(storage, 3) / "_metadata")
    warnings: list[str] = []
    assert storage.latest(warn=warnings.append).id == 1
    assert ["checkpoint 3" in warnings[0], "checkpoint 2" in warnings[1]] == [True, True]
    assert [c.id for c in storage.completed()] == [2, 1]  # _metadata of 3 does not parse


def test_when_every_checkpoint_is_corrupt_latest_refuses_to_start_over_silently(storage):
    (commit(storage, 1) / TABLE_FILE).unlink()
    warnings: list[str] = []
    with pytest.raises(CheckpointError, match="no checkpoint in .* can be restored") as e:
        storage.latest(warn=warnings.append)
    assert "delete the checkpoint directory" in e.value.hint
    assert len(warnings) == 1


def test_no_checkpoint_at_all_is_none(storage):
    assert storage.latest() is None
    storage.writer(1)  # begun, never committed
    assert storage.latest() is None and storage.completed() == []

"""A staged state table uploaded by its worker into the checkpoint storage (a worker on another
node than the driver: ``engine.checkpoint.staging``), then moved by the driver's writer within
that storage into the checkpoint: on S3 (moto's server on 127.0.0.1) and on a shared directory.
What no checkpoint took is removed: by ``discard_staged`` and ``discard_incomplete``."""
from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest

import s3_server
from weir.engine.checkpoint.files import children, exists
from weir.engine.checkpoint.location import RemotePath, location_text, parse_location
from weir.engine.checkpoint.staging import STAGED_FOLDER, discard_staged, upload_staged
from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.state.staged import StagedTable, stage_table

OPERATOR = "agg#1"



def _table() -> pa.Table:
    return pa.table({"key_group": pa.array([1, 1, 4, 9], pa.int32()), "k": [3, 5, 2, 7],
                     "n": pa.array([10, 20, 30, 2**70], pa.decimal128(38, 0))})


def _snapshot(spill: Path) -> dict:
    table = _table()
    staged = stage_table(spill / "snapshots", OPERATOR, "state", table.schema, table.to_batches(max_chunksize=2))
    return {OPERATOR: {"version": 1, "watermark": 0, "tables": {"state": staged, "small": table.slice(0, 1)}}}


@pytest.fixture(params=["s3", "shared"])
def checkpoints(request, tmp_path):
    if request.param == "s3":
        return parse_location(s3_server.uri(request.getfixturevalue("s3"), f"staged-{tmp_path.name}"))
    return tmp_path / "shared" / "checkpoints"


def test_a_worker_uploads_its_staged_table_and_the_driver_moves_it_into_the_checkpoint(tmp_path, checkpoints):
    spill = tmp_path / "worker-spill"
    snapshots = upload_staged(_snapshot(spill), location_text(checkpoints))
    staged = snapshots[OPERATOR]["tables"]["state"]
    assert isinstance(staged, StagedTable) and staged.sha256 and staged.bytes
    assert not list((spill / "snapshots").rglob("*.parquet")), "the worker's local file stays"
    area = checkpoints / STAGED_FOLDER
    assert location_text(parse_location(staged.path).parent if isinstance(area, RemotePath)
                         else Path(staged.path).parent) == location_text(area), staged.path
    assert isinstance(snapshots[OPERATOR]["tables"]["small"], pa.Table)  # small tables travel as Arrow
    sent = pickle.loads(pickle.dumps(snapshots))  # as the worker's connection carries it
    assert sent[OPERATOR]["tables"]["state"].read().equals(_table())

    storage = CheckpointStorage(location_text(checkpoints))
    writer = storage.writer(1)
    writer.write_state(OPERATOR, 0, sent[OPERATOR])
    assert not children(area), "the driver left the uploaded file in the staging area"
    assert not exists(storage.checkpoint_path(1) / "_metadata")  # still written last
    writer.commit({})
    restored = storage.latest().operator_state(OPERATOR)[0]["tables"]
    assert restored["state"].equals(_table()) and restored["small"].equals(_table().slice(0, 1))
    if isinstance(checkpoints, RemotePath):
        assert isinstance(storage.checkpoint_path(1), RemotePath)


def test_uploads_no_checkpoint_takes_are_removed(tmp_path, checkpoints):
    area = checkpoints / STAGED_FOLDER
    dropped = upload_staged(_snapshot(tmp_path / "a"), location_text(checkpoints))
    discard_staged({OPERATOR: {0: dropped[OPERATOR]}})  # as the driver drops an aborted checkpoint's
    assert not children(area)
    upload_staged(_snapshot(tmp_path / "b"), location_text(checkpoints))  # a run that failed midway
    assert len(children(area)) == 1
    CheckpointStorage(location_text(checkpoints)).discard_incomplete()  # before the restart's restore
    assert not exists(area)


def test_a_savepoint_elsewhere_takes_an_uploaded_table(tmp_path, checkpoints):
    """A savepoint at a path of the user's (here on this machine's disk: from S3, a copy across
    filesystems) takes the file from the checkpoints' staging area too."""
    snapshots = upload_staged(_snapshot(tmp_path / "spill"), location_text(checkpoints))
    storage = CheckpointStorage(location_text(checkpoints))
    writer = storage.writer(3, kind="savepoint", path=tmp_path / "savepoint")
    writer.write_state(OPERATOR, 0, snapshots[OPERATOR])
    writer.commit({})
    assert not children(checkpoints / STAGED_FOLDER)
    restored = CheckpointStorage.open(tmp_path / "savepoint").operator_state(OPERATOR)[0]["tables"]
    assert restored["state"].equals(_table())

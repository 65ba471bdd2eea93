"""Checkpoints and savepoints at a URI ('state.checkpoints.dir', 'state.savepoints.dir'): a
``file://`` directory and a real S3 server (moto's, started here on 127.0.0.1), through whole
jobs killed and restarted, a savepoint restored at another parallelism, and the storage's rules
on an object store: ``_metadata`` last, incomplete checkpoints ignored and removed, retention,
a corrupt newest checkpoint skipped for the one before."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

import s3_server
from s3_server import ROOT
from weir.engine.checkpoint.location import RemotePath, parse_location
from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.errors import EngineError
from weir.planner.settings import check_setting
from tests.test_recovery import (  # noqa: F401 - reference is a fixture
    CHECKPOINT_EVERY_BATCH, JOB_NAME, assert_no_leftovers, assert_only_completed_output, checkpoints, make_job,
    outputs, reference, run_killed, run_to_end,
)
from tests.engine.runtime.test_parallel import output, run, straight  # noqa: F401 - a fixture
from tests.engine.runtime.test_streamed_rescale import ask_for_stop



s3_uri = s3_server.uri


def table(*values: int) -> pa.Table:
    return pa.table({"key_group": pa.array(range(len(values)), pa.int32()), "v": pa.array(values, pa.int64())})


def write_checkpoint(storage: CheckpointStorage, checkpoint_id: int, commit: bool = True):
    writer = storage.writer(checkpoint_id)
    writer.write_state("agg", 0, {"tables": {"counts": table(checkpoint_id, 2, 3)}, "n": checkpoint_id})
    return writer.commit({"sources": {}}) if commit else writer


# -- the storage on S3 ---------------------------------------------------------------------------


def test_on_s3_a_checkpoint_exists_once_its_metadata_does_and_old_ones_go(s3, tmp_path):
    storage = CheckpointStorage(s3_uri(s3, "rules/job/checkpoints"), retained=2)
    assert isinstance(storage.directory, RemotePath) and storage.latest() is None
    for checkpoint_id in (1, 2, 3):
        write_checkpoint(storage, checkpoint_id)
    unfinished = write_checkpoint(storage, 4, commit=False)  # its state is written, its _metadata not
    assert storage.directory_ids() == [4, 3, 2]  # 1 went: two are retained
    assert [info.id for info in storage.completed()] == [3, 2]
    latest = storage.latest()
    assert latest.id == 3 and latest.operator_state("agg")[0]["n"] == 3
    restored = latest.operator_state("agg", range(1, 3), stream=True)[0]["tables"]["counts"]
    assert restored.read().column("v").to_pylist() == [2, 3]  # streamed from S3, key groups 1-2 only
    assert unfinished.path.uri.startswith(f"{ROOT}/rules/job/checkpoints/chk-4")

    storage.discard_incomplete()
    assert storage.directory_ids() == [3, 2]
    filesystem = storage.directory.filesystem
    assert filesystem.get_file_info(f"{s3_server.BUCKET}/rules/job/checkpoints/chk-4").type == pafs.FileType.NotFound


def test_on_s3_a_corrupt_newest_checkpoint_is_skipped_for_the_one_before(s3):
    storage = CheckpointStorage(s3_uri(s3, "corrupt/job/checkpoints"))
    write_checkpoint(storage, 1)
    newest = write_checkpoint(storage, 2)
    state = newest.path / "agg" / "subtask-0" / "counts.parquet"
    size = storage.directory.filesystem.get_file_info(state.path).size
    with storage.directory.filesystem.open_output_stream(state.path) as out:  # same size, other bytes
        out.write(b"\0" * size)
    warnings = []
    latest = storage.latest(warn=warnings.append)
    assert latest.id == 1
    assert len(warnings) == 1 and "checkpoint 2" in warnings[0] and "checksum" in warnings[0]


def test_a_remote_location_travels_as_its_uri(s3):
    import pickle

    location = parse_location(s3_uri(s3, "travel")) / "job" / "chk-3"
    again = pickle.loads(pickle.dumps(location))
    assert again == location and again.uri == f"{ROOT}/travel/job/chk-3?{s3}"
    assert again.parent.name == "job"


# -- whole jobs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "s3"])
def test_a_job_checkpointing_to_a_uri_killed_twice_restarts_to_the_uninterrupted_output(
        where, tmp_path, reference, request):  # noqa: F811
    directory = make_job(tmp_path / "job")
    if where == "file":
        uri = (tmp_path / "shared").as_uri()  # file:///...
        stored = tmp_path / "shared" / JOB_NAME / "checkpoints"
    else:
        uri = s3_uri(request.getfixturevalue("s3"), f"jobs-{tmp_path.name}")
        stored = f"{uri.partition('?')[0]}/{JOB_NAME}/checkpoints?{uri.partition('?')[2]}"
    settings = [*CHECKPOINT_EVERY_BATCH, "--set", f"state.checkpoints.dir={uri}"]
    run_killed(directory, *settings, fault="after-metadata:3")
    storage = CheckpointStorage(stored)
    assert [info.id for info in storage.completed()][:1] == [3], "the checkpoints are not at the URI"
    assert not checkpoints(directory).directory.exists(), "checkpoints were written to the local state dir"
    assert (directory / ".weir" / JOB_NAME / "control").is_dir()  # the control channel stays local
    run_killed(directory, *settings, fault="commit:4")
    assert_only_completed_output_at(directory, reference, storage)

    run_to_end(directory, *settings)

    assert outputs(directory) == reference
    assert_no_leftovers(directory)
    assert storage.latest().metadata["finished"]


def assert_only_completed_output_at(directory, reference, storage) -> None:  # noqa: F811
    """``assert_only_completed_output``, with the checkpoints read from ``storage``."""
    import tests.test_recovery as recovery

    original = recovery.checkpoints
    recovery.checkpoints = lambda _: storage
    try:
        assert_only_completed_output(directory, reference)
    finally:
        recovery.checkpoints = original


def test_a_savepoint_on_s3_restores_at_another_parallelism(s3, tmp_path, straight):  # noqa: F811
    expected, _ = straight
    where = {"state.savepoints.dir": s3_uri(s3, f"savepoints-{tmp_path.name}")}
    first = run(tmp_path, 2, events=None, on_executor=ask_for_stop(tmp_path), settings=where)
    savepoint = first.stopped_with.path
    assert isinstance(savepoint, RemotePath) and savepoint.uri.startswith(f"{ROOT}/savepoints-")
    # given as text, as `weir run --from-savepoint URI` gives it; three workers each read their key groups
    run(tmp_path, 3, savepoint=savepoint.uri)
    assert output(tmp_path) == expected


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value, says", [
    ("foo://bucket/x", "'foo://' is none of them"),
    ("s3:/bucket/x", "'s3://bucket/x'"),
    ("s3://", "not the bare 's3://'"),
])
def test_a_bad_location_is_refused_when_set_naming_the_key_and_the_fix(value, says):
    problem = check_setting("state.checkpoints.dir", value=value)
    assert problem is not None and says in problem.message and "state.checkpoints.dir" in problem.message
    assert check_setting("state.savepoints.dir", value=value) is not None


def test_a_location_pyarrow_cannot_open_fails_before_the_job_naming_the_key():
    with pytest.raises(EngineError) as e:
        parse_location("hdfs://nowhere.invalid:1/x", "'state.checkpoints.dir'")
    assert "'state.checkpoints.dir'" in e.value.message and e.value.hint
    assert check_setting("state.checkpoints.dir", value="s3://bucket/x?endpoint_override=h:1") is None
    assert check_setting("state.checkpoints.dir", value="/mnt/shared/checkpoints") is None


def test_a_scheme_whose_filesystem_this_pyarrow_lacks_is_refused_naming_it(monkeypatch):
    import pyarrow.fs

    monkeypatch.setattr(pyarrow.fs, "_not_imported", [*pyarrow.fs._not_imported, "GcsFileSystem"])
    monkeypatch.delattr(pyarrow.fs, "GcsFileSystem")
    problem = check_setting("state.savepoints.dir", value="gs://bucket/savepoints")
    assert problem is not None and "built without GcsFileSystem" in problem.message

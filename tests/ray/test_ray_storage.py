"""A Ray job's checkpoints and savepoints at a URI every node reaches: the actors on both nodes
of the test cluster (conftest.py's) are sent the URI, not a path of the driver's, and read
their key groups from it.

- ``file://``: a worker actor SIGKILLed mid-job, the restart restoring every worker from the
  ``file://`` checkpoint; the output is exact.
- ``s3://`` (moto's S3 server on 127.0.0.1, as in tests/test_checkpoint_uri.py): a savepoint
  taken on Ray at parallelism 2 restores on Ray at parallelism 3 from its URI."""
from __future__ import annotations

import pytest

import s3_server
from jobs import stop_after_first_checkpoint
from ray_jobs import RESTARTS, output, restarts, run  # the job every Ray test shares

from weir.engine.checkpoint.location import RemotePath
from weir.engine.checkpoint.storage import CheckpointStorage

pytestmark = pytest.mark.xdist_group("ray")


def test_a_ray_job_checkpointing_to_a_file_uri_restarts_after_a_killed_actor_to_the_exact_output(
        cluster, tmp_path, one_worker, monkeypatch):
    expected, _ = one_worker
    monkeypatch.setenv("WEIR_FAULT", "batch:3@1")  # worker 1 is SIGKILLed after its 3rd batch, once
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(tmp_path / "fired"))
    shared = tmp_path / "shared"
    warnings: list[str] = []
    run(tmp_path, 2, settings={**RESTARTS, "state.checkpoints.dir": shared.as_uri()}, warn=warnings.append)
    assert (tmp_path / "fired").exists() and len(restarts(warnings)) == 1, warnings
    assert not (tmp_path / "state" / "checkpoints").exists(), "checkpoints went to the local state dir"
    latest = CheckpointStorage(shared / "job" / "checkpoints").latest()
    assert latest is not None and latest.metadata["finished"]
    assert output(tmp_path) == expected


def test_a_savepoint_on_s3_taken_on_ray_restores_on_ray_at_another_parallelism(cluster, tmp_path, one_worker):
    expected, _ = one_worker
    try:
        server, query = s3_server.start()
    except ImportError as missing:
        pytest.skip(f"moto[server] (in the test extra) is not installed: {missing}")
    try:
        every_batch = {"weir.checkpointing.interval-batches": "1",
                       "state.checkpoints.dir": s3_server.uri(query, f"ray-{tmp_path.name}")}
        first = run(tmp_path, 2, batch_size=200, settings=every_batch,
                    on_checkpoint=stop_after_first_checkpoint(tmp_path / "state"))
        savepoint = first.stopped_with.path
        assert isinstance(savepoint, RemotePath) and first.stopped_with.kind == "savepoint"
        run(tmp_path, 3, batch_size=200, settings=every_batch, from_savepoint=savepoint.uri)
        assert output(tmp_path) == expected
    finally:
        server.stop()

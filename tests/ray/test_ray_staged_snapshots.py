"""State tables staged at snapshot time by Ray worker actors reach the checkpoint from any node:
each actor uploads its staged files into the checkpoint storage (``<checkpoints>/_staged/``)
before it sends its snapshot, and the driver moves them from there, never from an actor's spill
directory (on its node's disk, which a driver on another machine cannot see).

Staging is forced for small tables (``WEIR_SNAPSHOT_BATCH_ROWS``, forwarded to the actors: a table
of more than two such batches is staged); the driver SIGKILLs worker actor 1 once the first
checkpoint is complete (its staged tables moved), in a first run that cannot end before it
(``pause_the_first_run``), and the restart restores from that checkpoint to the exact output."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ray_jobs import EVERY_100_MS, RESTARTS, output, pause_the_first_run, restarts, run  # the job every Ray test shares

from weir.engine.checkpoint import state_files
from weir.engine.checkpoint.staging import STAGED_FOLDER
from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.operators.duckdb_sql import SNAPSHOT_BATCH_ROWS_VARIABLE

pytestmark = pytest.mark.xdist_group("ray")


def test_staged_tables_reach_the_checkpoint_through_its_storage_and_a_killed_actor_restarts_exactly(
        cluster, tmp_path, one_worker, monkeypatch):
    expected, _ = one_worker
    monkeypatch.setenv(SNAPSHOT_BATCH_ROWS_VARIABLE, "8")
    paused = pause_the_first_run(monkeypatch, tmp_path)
    received: list[str] = []
    before_kill: list[str] = []
    executors: list = []
    killed: list[int] = []
    moved_from_spill: list[str] = []
    move_staged, move_file = state_files.move_staged, state_files.move_file

    def record_staged(root, relative, table):
        received.append(table.path)
        if not killed:
            before_kill.append(table.path)
        return move_staged(root, relative, table)

    def record_local(root, relative, source):
        moved_from_spill.append(str(source))
        return move_file(root, relative, source)

    def kill_worker_1(event) -> None:
        if not killed:
            killed.append(executors[-1].worker_pids[1])
            os.kill(killed[-1], signal.SIGKILL)

    monkeypatch.setattr(state_files, "move_staged", record_staged)  # the driver's writer runs here
    monkeypatch.setattr(state_files, "move_file", record_local)
    shared = tmp_path / "shared"
    warnings: list[str] = []
    run(tmp_path, 2, settings={**RESTARTS, **EVERY_100_MS, "state.checkpoints.dir": shared.as_uri()},
        on_executor=executors.append, on_checkpoint=kill_worker_1, warn=warnings.append)
    assert paused.exists(), "worker 0's sources were never paused"
    assert killed and len(restarts(warnings)) == 1 and len(executors) == 2, warnings

    checkpoints = shared / "job" / "checkpoints"
    assert received, "no state table was staged: the test does not test staging"
    assert before_kill, "no checkpoint before the kill held a staged table: the restart restores none"
    assert not moved_from_spill, f"the driver moved files out of the actors' spill directories: {moved_from_spill}"
    assert all(Path(path).parent == checkpoints / STAGED_FOLDER for path in received), received
    assert not list((checkpoints / STAGED_FOLDER).glob("*")), "uploads left behind"
    assert not list((tmp_path / "state").rglob("*.parquet")), "staged files left in the spill directories"
    latest = CheckpointStorage(checkpoints).latest()
    assert latest is not None and latest.metadata["finished"]
    assert output(tmp_path) == expected

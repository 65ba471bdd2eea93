"""A run's hold on its state directory, its workers' deaths, and what it refuses before starting.

- Two starts on one state directory: the second fails at once, naming the running process,
  and touches nothing; the first finishes with exact output.
- A worker killed while it restores from a checkpoint (fault point ``restore``): the job
  fails with a clear error per its restart strategy, never hangs; run again, its output is exact.
- A parallelism above 'pipeline.max-parallelism' or the open-file limit is refused before
  the state directory is even made.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

import duckdb
import pytest

from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.errors import EngineError
from weir.engine.runtime import parallel
from weir.engine.runtime.control import lock_state_dir
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

from jobs import KEY_WINDOWS_JOB as JOB, KEY_WINDOWS_ORACLE

@pytest.fixture
def job(tmp_path: Path):
    data = tmp_path / "events.csv"
    data.write_text("ts,k,v\n" + "".join(f"2024-01-01 00:00:{2 * i:02d},{'abc'[i % 3]},{i}\n" for i in range(24)))
    return tmp_path


def graph(tmp: Path, **settings: str):
    settings = {"weir.source.batch-size": "2", "weir.checkpointing.interval-batches": "1", **settings}
    sql = JOB.format(data=tmp / "events.csv", out=tmp / "out")
    return plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings).graph


def output(tmp: Path) -> list:
    return duckdb.sql(f"SELECT * FROM read_csv('{tmp / 'out'}/*.csv') ORDER BY ALL").fetchall()


def expected(tmp: Path) -> list:
    return duckdb.sql(KEY_WINDOWS_ORACLE.format(files=tmp / "events.csv")).fetchall()


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_second_start_on_a_running_jobs_state_dir_fails_at_once_and_touches_nothing(job):
    state = job / "state"
    paused, resume = threading.Event(), threading.Event()

    def hold(event) -> None:  # the first run stops, mid-job, after its first checkpoint
        if not paused.is_set():
            paused.set()
            resume.wait(60)

    results, errors = [], []

    def first_run() -> None:
        try:
            results.append(run_job(graph(job), JobOptions(state_dir=state, on_checkpoint=hold)))
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    first = threading.Thread(target=first_run)
    first.start()
    assert paused.wait(60), errors
    before = files(state)
    assert "control/job.json" in before and any(name.startswith("checkpoints/") for name in before)

    with pytest.raises(EngineError) as refused:
        run_job(graph(job), JobOptions(state_dir=state))
    assert refused.value.message == (f"the state directory {state} is in use by another run of this job "
                                     f"(process {os.getpid()})")
    assert "--state-dir" in refused.value.hint
    assert files(state) == before  # nothing deleted, job.json untouched

    resume.set()
    first.join(60)
    assert not first.is_alive() and errors == []
    assert output(job) == expected(job)
    lock_state_dir(state).release()  # the lock went with the run


def test_a_worker_killed_while_it_restores_fails_the_job_clearly_and_a_rerun_is_exact(job, monkeypatch):
    state = job / "state"
    # The workers (spawned: they read it) die as they commit checkpoint 1, which is then complete
    # (a kill at a batch could come before any checkpoint completed: nothing to restore from).
    monkeypatch.setenv("WEIR_FAULT", "commit:1")
    with pytest.raises(EngineError, match=r"worker \d of job .* died"):  # both die; either is seen first
        run_job(graph(job, **{"parallelism.default": "2"}), JobOptions(state_dir=state))
    assert CheckpointStorage(state / "checkpoints").completed(), "nothing to restore from"

    monkeypatch.setenv("WEIR_FAULT", "restore:1")  # now every worker dies as it restores
    restarts = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
                "restart-strategy.fixed-delay.delay": "0s", "parallelism.default": "2"}
    warnings: list[str] = []
    failed: list[BaseException] = []

    def restoring_run() -> None:
        try:
            run_job(graph(job, **restarts), JobOptions(state_dir=state, warn=warnings.append))
        except BaseException as error:  # noqa: BLE001 - checked below
            failed.append(error)

    attempt = threading.Thread(target=restoring_run)
    attempt.start()
    attempt.join(120)  # a guard, not a measure: the run used to hang here for ever
    assert not attempt.is_alive(), "the coordinator hung on a worker that died while restoring"
    assert len(failed) == 1 and isinstance(failed[0], EngineError), failed
    assert "died" in failed[0].message and "resumes from its latest checkpoint" in failed[0].hint
    assert len(warnings) == 1 and "restarting from its latest checkpoint" in warnings[0]  # the strategy's one restart

    monkeypatch.delenv("WEIR_FAULT")
    run_job(graph(job, **{"parallelism.default": "2"}), JobOptions(state_dir=state))
    assert output(job) == expected(job)


def test_a_parallelism_beyond_max_parallelism_or_the_open_file_limit_is_refused_before_starting(job, monkeypatch):
    state = job / "state"
    with pytest.raises(EngineError, match=r"'parallelism.default' is 200, above 'pipeline.max-parallelism' \(128\)"):
        run_job(graph(job, **{"parallelism.default": "200"}), JobOptions(state_dir=state))
    monkeypatch.setattr(parallel.resource, "getrlimit", lambda which: (256, 256))
    with pytest.raises(EngineError) as refused:
        run_job(graph(job, **{"parallelism.default": "20"}), JobOptions(state_dir=state))
    assert refused.value.message == ("'parallelism.default' is 20: its 20 workers need about 904 open files "
                                     "(a pipe between every two), above this machine's limit of 256")
    assert refused.value.hint.startswith("use a parallelism of at most 9,")
    assert not state.exists()  # refused before anything was made

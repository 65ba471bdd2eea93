"""A savepoint whose barrier reaches workers that have already finished (a `weir stop
--savepoint` racing the end of a bounded input, as the Ray storage test's often does) holds
their last output, and restores at another parallelism to the output of one worker.

The race is forced rather than waited for: the job is asked to stop with a savepoint the
moment its coordinator hears that the last worker (or the first) has finished, so the
savepoint's barrier meets finished workers every time. Their last output used to be pre-committed under a
stand-in id above every checkpoint's (the final one's), which the savepoint then committed: the
DuckDB sink's commit log put it after the savepoint, and the restore took it back from the
append-only view (`sessions` empty) while the savepoint's sources were at their end, so nothing
made it again."""
from __future__ import annotations

from pathlib import Path

import pytest
from bids_job import JOB, output  # the job the Ray tests share

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse


def run(tmp: Path, parallelism: int, **options):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "200",
                "weir.checkpointing.interval-batches": "4"}
    sql = JOB.format(events=", 'events' = '4000'", out=tmp / "out")
    script = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings)
    return run_job(script.graph, JobOptions(state_dir=tmp / "state", **options))


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("p1")
    result = run(tmp, 1)
    expected = output(tmp)
    assert all(expected.values())
    return expected, result


def stop_when_finished(control: Path, workers: str):
    """An ``on_executor`` that asks the job (through its control folder, as `weir stop --savepoint`
    does) to stop with a savepoint as soon as its coordinator hears that ``workers`` ('all' or
    'one') have finished: the savepoint's barrier is sent after that. A request that came before
    the final checkpoint is asked for is served first, however recently the folder was looked at."""
    def arm(executor) -> None:
        handle = executor._handle

        def handle_then_ask(message: tuple) -> None:
            handle(message)
            finished = len(executor._finished)
            if message[0] == "finished" and finished == (executor.parallelism if workers == "all" else 1):
                (control / "stop-test.request").write_text('{"kind": "stop", "path": null}')
        executor._handle = handle_then_ask
    return arm


@pytest.mark.parametrize("workers", ["all", "one"])
def test_a_savepoint_taken_as_workers_finish_restores_at_another_parallelism(tmp_path, one_worker, workers):
    expected, one = one_worker
    control = tmp_path / "state" / "control"
    first = run(tmp_path, 2, on_executor=stop_when_finished(control, workers))
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    assert (control / "stop-test.response").exists()
    if workers == "all":
        assert first.rows_read == one.rows_read  # the savepoint came after the end of the input
        assert first.stopped_with.checkpoint_id == first.checkpoints[-1].checkpoint_id  # no final checkpoint
    warnings: list[str] = []
    run(tmp_path, 3, from_savepoint=first.stopped_with.path, warn=warnings.append)
    assert not [w for w in warnings if "withdrew" in w], warnings  # nothing was published after the savepoint
    assert output(tmp_path) == expected

"""The Ray executor: the same job on the actors of a two-node Ray cluster gives the output of
one worker — a tumble, a session window and an updating GROUP BY — also when a worker actor
is killed mid-job, and a savepoint taken on Ray finishes on the process executor.

The cluster (a head and a second node, each with CPUs of its own) is conftest.py's."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import pytest

try:
    import ray  # noqa: F401
except ImportError as missing:  # pragma: no cover - CI installs the test extra, which has Ray
    pytest.skip(f"Ray is not installed ({missing}): pip install 'weir[ray]'", allow_module_level=True)

from jobs import stop_after_first_checkpoint
from ray_jobs import EVENTS, JOB, output, run

from weir.engine.runtime.ray_executor import RayExecutor

# Every Ray test runs in one xdist worker (with `--dist loadgroup` in pyproject), so that CI
# starts a single cluster (conftest.py's).
pytestmark = pytest.mark.xdist_group("ray")


@pytest.mark.parametrize("parallelism", [2, 3])
def test_the_job_on_ray_actors_of_two_nodes_equals_one_worker(cluster, tmp_path, one_worker, parallelism):
    expected, one = one_worker
    executors: list[RayExecutor] = []
    result = run(tmp_path, parallelism, on_executor=executors.append)
    assert output(tmp_path) == expected
    assert [type(e) for e in executors] == [RayExecutor]
    assert len(set(executors[0].worker_nodes)) == 2  # SPREAD: the actors run on both nodes
    assert len(set(executors[0].worker_pids)) == parallelism and os.getpid() not in executors[0].worker_pids
    assert result.rows_read == one.rows_read
    # Each row handled once, by one worker (the updating view's changelog depends on how updates batch up).
    appending = lambda metrics: {m.id: m.rows_in for m in metrics if m.id != "per_auction_total.sink"}  # noqa: E731
    assert appending(result.operators) == appending(one.operators)
    assert result.counter("late_rows_dropped") == one.counter("late_rows_dropped")
    assert len(result.checkpoints) > 2


def test_a_worker_actor_killed_mid_job_restarts_from_its_latest_checkpoint_to_the_exact_output(
        cluster, tmp_path, one_worker):
    """SIGKILL worker 1's actor process once a few checkpoints are complete: weir's restart
    strategy runs the job again on new actors from the latest checkpoint, and nothing is lost
    or counted twice."""
    expected, _ = one_worker
    executors: list[RayExecutor] = []
    killed: list[int] = []

    def kill_worker_1(event) -> None:
        if event.checkpoint_id == 3 and not killed:
            killed.append(executors[-1].worker_pids[1])
            os.kill(killed[0], signal.SIGKILL)

    warnings: list[str] = []
    settings = {"weir.checkpointing.interval-batches": "1", "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": "1", "restart-strategy.fixed-delay.delay": "0s"}
    run(tmp_path, 2, batch_size=200, settings=settings, on_executor=executors.append, on_checkpoint=kill_worker_1,
        warn=warnings.append)
    assert killed, "the job ended before its third checkpoint"
    restarts = [w for w in warnings if "restarting from its latest checkpoint" in w]
    assert len(restarts) == 1 and "worker 1 of job" in restarts[0] and "Ray actor" in restarts[0], warnings
    assert len(executors) == 2 and killed[0] not in executors[1].worker_pids
    assert output(tmp_path) == expected


def test_a_savepoint_taken_on_ray_finishes_on_the_process_executor_at_another_parallelism(
        cluster, tmp_path, one_worker):
    expected, _ = one_worker
    every_batch = {"weir.checkpointing.interval-batches": "1"}
    first = run(tmp_path, 2, batch_size=200, settings=every_batch,
                on_checkpoint=stop_after_first_checkpoint(tmp_path / "state"))
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    assert first.rows_read < EVENTS  # it stopped part-way
    executors: list = []
    run(tmp_path, 3, target="local", batch_size=200, settings=every_batch, from_savepoint=first.stopped_with.path,
        on_executor=executors.append)
    assert [type(e).__name__ for e in executors] == ["ProcessExecutor"]
    assert output(tmp_path) == expected


def test_weir_run_executor_ray_with_relative_paths_and_a_fault_point_killing_worker_1(
        cluster, tmp_path, one_worker):
    """`weir run --executor ray --ray-address ...` from another process: the actors resolve the
    job's relative paths against its working directory, get its WEIR_FAULT (forwarded to them),
    worker 1 is SIGKILLed after its 3rd batch, and the restart ends with the exact output."""
    expected, _ = one_worker
    (tmp_path / "job.sql").write_text(JOB.format(events=f", 'events' = '{EVENTS}'", out="out"))
    env = {**os.environ, "WEIR_FAULT": "batch:3@1", "WEIR_FAULT_ONCE": str(tmp_path / "fired")}
    settings = ["--set", "weir.source.batch-size=200", "--set", "weir.checkpointing.interval-batches=1",
                "--set", "restart-strategy.type=fixed-delay", "--set", "restart-strategy.fixed-delay.delay=0s"]
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--db", "views.duckdb",
                           "--no-progress", "--parallelism", "2", "--executor", "ray",
                           "--ray-address", cluster.address, *settings],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "fired").exists(), "the fault never fired in an actor"
    assert "worker 1 of job job (a Ray actor) died" in done.stderr and "restarting" in done.stderr, done.stderr
    assert output(tmp_path) == expected

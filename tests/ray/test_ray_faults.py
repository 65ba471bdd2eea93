"""Faults of a job on Ray, each ending in the output of one worker, row for row: worker actors
SIGKILLed at moments drawn at random (by batches and checkpoints), a whole node killed (its
worker's sockets ending, or left open by a frozen process), a node that never comes back (the
job goes on at a lower parallelism, where 'jobmanager.scheduler' = 'adaptive' allows it, and
otherwise fails naming that option until a node is back), the driver killed (the same command
resumes, and the dead driver's actors hold no CPU), and a savepoint of the process executor
finished on Ray at another parallelism.

Restarts are weir's own (the restart strategy, from the latest checkpoint, on new actors): the
actors have ``max_restarts=0``."""
from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

try:
    import ray
except ImportError as missing:  # pragma: no cover - CI installs the test extra, which has Ray
    pytest.skip(f"Ray is not installed ({missing}): pip install 'weir[ray]'", allow_module_level=True)

from jobs import stop_after_first_checkpoint
from ray_jobs import EVENTS, EVERY_100_MS, JOB, PACED, RESTARTS, output, pause_the_first_run, restarts, run

from ray._private.ray_constants import PROCESS_TYPE_RAYLET as RAYLET

from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.errors import EngineError
from weir.engine.runtime.ray_executor import RayExecutor

pytestmark = pytest.mark.xdist_group("ray")

EVERY_BATCH = {"weir.checkpointing.interval-batches": "1"}
#: Each actor takes a whole node of the cluster (two CPUs): one actor per node, wherever Ray puts them.
WHOLE_NODE = {"ray.actor.num-cpus": "2"}


def free_cpus_become(total: float, deadline_seconds: float = 60.0) -> bool:
    """Wait until the cluster's free CPUs are ``total`` (no actor holds any), at most a minute."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        if ray.available_resources().get("CPU", 0) == total:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def third_node(cluster):
    """A third node of two CPUs for a test to kill; removed afterwards if the test did not."""
    node = cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    try:
        yield node
    finally:
        if node in cluster.worker_nodes:
            cluster.remove_node(node, allow_graceful=False)
        assert free_cpus_become(4), ray.available_resources()


@pytest.mark.parametrize("seed", [7])
def test_worker_actors_killed_at_random_batches_and_checkpoints_restart_to_the_exact_output(
        cluster, tmp_path, one_worker, monkeypatch, seed):
    """Two kills drawn from ``seed``: a worker dies in its n-th source batch (a WEIR_FAULT in
    the actor, firing once: in the first run), then the driver SIGKILLs a random worker's process
    at the k-th checkpoint of the next run. Every kill is one restart from the
    latest checkpoint, and nothing is lost or counted twice."""
    expected, _ = one_worker
    draw = random.Random(seed)
    parallelism = draw.choice([2, 3])
    # Only workers 0 and 1 read a split (the source has two): a batch fault of one of them.
    monkeypatch.setenv("WEIR_FAULT", f"batch:{draw.randint(1, 4)}@{draw.randrange(2)}")
    fired = tmp_path / "fired"
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(fired))
    # (A run resumed from a late checkpoint completes few more: the job has about 8 in all.)
    at_checkpoint = [draw.randint(1, 2)]  # of the second run
    executors: list[RayExecutor] = []
    completed: list[int] = []  # checkpoints each run completed
    killed: list[int] = []

    def start(executor) -> None:
        executors.append(executor)
        completed.append(0)

    def kill_at_random(event) -> None:
        run_index = len(executors) - 1
        completed[run_index] += 1
        if 1 <= run_index <= len(at_checkpoint) and completed[run_index] == at_checkpoint[run_index - 1]:
            killed.append(executors[-1].worker_pids[draw.randrange(executors[-1].parallelism)])
            os.kill(killed[-1], signal.SIGKILL)

    warnings: list[str] = []
    run(tmp_path, parallelism, batch_size=200, rate=PACED, settings={**EVERY_BATCH, **RESTARTS},
        on_executor=start, on_checkpoint=kill_at_random, warn=warnings.append)
    assert fired.exists(), "the batch fault never fired"
    assert len(killed) == 1, f"a run ended before its drawn checkpoint {at_checkpoint}: {completed}"
    assert len(restarts(warnings)) == 2 == len(executors) - 1, warnings
    assert all("(a Ray actor) died" in w for w in restarts(warnings)), warnings
    assert not set(killed) & set(executors[-1].worker_pids)
    assert output(tmp_path) == expected


def test_a_node_killed_mid_job_restarts_on_the_rest_at_lower_parallelism_when_adaptive(
        cluster, third_node, tmp_path, one_worker, monkeypatch):
    """Parallelism 3 on three nodes, one actor each; the third node's processes are all killed
    (raylet and workers, no graceful shutdown) at checkpoint 2, while the first run cannot end
    (``pause_the_first_run``). Adaptive, the restart runs at 2."""
    expected, _ = one_worker
    paused = pause_the_first_run(monkeypatch, tmp_path)
    executors: list[RayExecutor] = []

    def kill_the_node(event) -> None:
        if len(executors) == 1 and third_node in cluster.worker_nodes and event.checkpoint_id == 2:
            cluster.remove_node(third_node, allow_graceful=False)

    warnings: list[str] = []
    settings = {**EVERY_BATCH, **RESTARTS, **WHOLE_NODE, **EVERY_100_MS, "jobmanager.scheduler": "adaptive"}
    run(tmp_path, 3, batch_size=200, settings=settings, on_executor=executors.append,
        on_checkpoint=kill_the_node, warn=warnings.append)
    assert paused.exists(), "worker 0's sources were never paused"
    assert third_node not in cluster.worker_nodes, "the job ended before its second checkpoint"
    assert third_node.node_id in executors[0].worker_nodes  # one of its actors was on the node killed
    assert [e.parallelism for e in (executors[0], executors[-1])] == [3, 2]
    assert third_node.node_id not in executors[-1].worker_nodes
    assert any("runs at parallelism 2, not 3" in w and "'jobmanager.scheduler' = 'adaptive'" in w
               for w in warnings), warnings
    assert output(tmp_path) == expected


def test_a_node_lost_while_its_frozen_worker_keeps_its_sockets_open_is_noticed_by_asking_ray(
        cluster, third_node, tmp_path, one_worker, monkeypatch):
    """The third node is frozen at checkpoint 2 of a first run that cannot end
    (``pause_the_first_run``), as a machine cut off from the others: its raylet and its worker
    stopped (SIGSTOP), the worker's sockets open but silent. Only Ray learns the
    node is gone (it misses its health checks), and the driver, asking Ray about the actors once
    a second, fails the run; the restart runs at parallelism 2 on the rest. (The node's raylet is
    stopped, not killed: a raylet's death would orphan its stopped worker's process group, whose
    members then get SIGHUP, ending the worker and its sockets.)"""
    expected, _ = one_worker
    paused = pause_the_first_run(monkeypatch, tmp_path)
    executors: list[RayExecutor] = []
    frozen: list[int] = []

    def freeze_the_node(event) -> None:
        if not frozen and event.checkpoint_id == 2:
            executor = executors[-1]
            frozen.append(third_node.all_processes[RAYLET][0].process.pid)
            frozen.append(executor.worker_pids[executor.worker_nodes.index(third_node.node_id)])
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)

    warnings: list[str] = []
    settings = {**EVERY_BATCH, **RESTARTS, **WHOLE_NODE, **EVERY_100_MS, "jobmanager.scheduler": "adaptive"}
    try:
        run(tmp_path, 3, batch_size=200, settings=settings, on_executor=executors.append,
            on_checkpoint=freeze_the_node, warn=warnings.append)
        assert paused.exists(), "worker 0's sources were never paused"
        assert frozen, "the job ended before its second checkpoint"
        os.kill(frozen[1], 0)  # the frozen worker still lives: nothing ended its sockets
    finally:
        if frozen:
            os.kill(frozen[1], signal.SIGKILL)  # (the node's raylet: the fixture removes the node)
    died = restarts(warnings)
    assert len(died) == 1 and "(a Ray actor) died while its connections were open" in died[0], warnings
    assert [e.parallelism for e in executors] == [3, 2]
    assert output(tmp_path) == expected


def test_without_adaptive_a_job_that_lost_a_node_fails_naming_the_option_until_a_node_is_back(
        cluster, third_node, tmp_path, one_worker, monkeypatch):
    """The third node is killed at checkpoint 2 of a first run that cannot end
    (``pause_the_first_run``). Not adaptive, the restart after the lost node waits
    'slot.request.timeout' for room for 3 actors and fails, naming 'jobmanager.scheduler'; the
    node is back for the next restart, which runs at parallelism 3 again. Once no restart is
    left, that error is the job's."""
    expected, _ = one_worker
    paused = pause_the_first_run(monkeypatch, tmp_path)
    executors: list[RayExecutor] = []
    back: list = []

    def kill_the_node(event) -> None:
        if len(executors) == 1 and event.checkpoint_id == 2 and third_node in cluster.worker_nodes:
            cluster.remove_node(third_node, allow_graceful=False)

    def add_a_node_back(message: str) -> None:
        warnings.append(message)
        if "'jobmanager.scheduler' is not 'adaptive'" in message and not back:
            back.append(cluster.add_node(num_cpus=2))
            cluster.wait_for_nodes()

    warnings: list[str] = []
    settings = {**EVERY_BATCH, **RESTARTS, **WHOLE_NODE, **EVERY_100_MS, "slot.request.timeout": "2s"}
    try:
        run(tmp_path, 3, batch_size=200, settings=settings, on_executor=executors.append,
            on_checkpoint=kill_the_node, warn=add_a_node_back)
        assert paused.exists(), "worker 0's sources were never paused"
        assert back, warnings
        assert {e.parallelism for e in executors} == {3}
        assert "have had room for 2 of the 3 worker actors" in restarts(warnings)[1], warnings
        assert output(tmp_path) == expected
        # With the node gone and no restart left, the run fails with that error.
        cluster.remove_node(back[0], allow_graceful=False)
        (tmp_path / "again").mkdir()
        with pytest.raises(EngineError) as error:
            run(tmp_path / "again", 3, settings={**WHOLE_NODE, "slot.request.timeout": "1s"})
        assert error.value.message == ("the Ray cluster's live nodes have had room for 2 of the 3 worker actors "
                                       "of job job (2 CPU each) for 'slot.request.timeout' (1s), and "
                                       "'jobmanager.scheduler' is not 'adaptive'")
        assert "SET 'jobmanager.scheduler' = 'adaptive'" in error.value.hint
    finally:
        for node in back:
            if node in cluster.worker_nodes:
                cluster.remove_node(node, allow_graceful=False)


def test_a_killed_driver_leaves_no_actor_behind_and_the_same_command_resumes_to_the_exact_output(
        cluster, tmp_path, one_worker):
    """`weir run --executor ray` SIGKILLs itself (a WEIR_FAULT of the coordinator) once its 3rd
    checkpoint is durable, before that checkpoint's output is committed. Its actors die with it
    (Ray ends the actors of a dead owner: they are not detached); the same command again resumes
    from checkpoint 3 and ends with the exact output."""
    expected, _ = one_worker
    (tmp_path / "job.sql").write_text(JOB.format(events=f", 'events' = '{EVENTS}'", out="out"))
    env = {**os.environ, "WEIR_FAULT": "after-metadata:3", "WEIR_FAULT_ONCE": str(tmp_path / "fired")}
    command = [sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--db", "views.duckdb", "--no-progress",
               "--parallelism", "2", "--executor", "ray", "--ray-address", cluster.address,
               "--set", "weir.source.batch-size=200", "--set", "weir.checkpointing.interval-batches=1"]
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert first.returncode == -signal.SIGKILL, first.stdout + first.stderr
    assert CheckpointStorage(tmp_path / ".weir/job/checkpoints").completed()[0].id == 3
    assert free_cpus_become(4), f"the dead driver's actors still hold CPUs: {ray.available_resources()}"
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    # It resumed from checkpoint 3: the events before it were not read again. Where the sources
    # ran ahead of the checkpoints (a loaded machine), checkpoint 3 was the final one, and the
    # run again only commits its output.
    if "had already finished; the output of its final checkpoint is now committed" not in again.stdout:
        read = re.search(r"([\d,]+) events read", again.stdout + again.stderr)
        assert read, again.stdout + again.stderr
        assert 0 < int(read.group(1).replace(",", "")) < EVENTS
    assert output(tmp_path) == expected


def test_a_savepoint_of_the_process_executor_finishes_on_ray_at_another_parallelism(
        cluster, tmp_path, one_worker):
    expected, _ = one_worker
    first = run(tmp_path, 3, target="local", batch_size=200, settings=EVERY_BATCH,
                on_checkpoint=stop_after_first_checkpoint(tmp_path / "state"))
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    assert first.rows_read < EVENTS
    executors: list = []
    run(tmp_path, 2, batch_size=200, settings=EVERY_BATCH, from_savepoint=first.stopped_with.path,
        on_executor=executors.append)
    assert [(type(e).__name__, e.parallelism) for e in executors] == [("RayExecutor", 2)]
    assert output(tmp_path) == expected

"""One Ray cluster for every Ray test (they run in one xdist worker: ``xdist_group("ray")`` with
``--dist loadgroup``): a head node and a second node, two CPUs each, on this machine, started by
Ray's own test utility; this process is its driver. A test may add nodes and remove them
(``cluster.add_node``, ``cluster.remove_node``); it leaves the head and the second node as they were.

Nodes are checked on often (``health_check_*``), so that a node killed by a test is declared dead
within seconds, not Ray's default half-minute."""
from __future__ import annotations

import pytest

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError as missing:  # pragma: no cover - CI installs the test extra, which has Ray
    ray = Cluster = None
    MISSING = f"Ray is not installed ({missing}): pip install 'weir[ray]'"

#: How Ray's control store checks that a node lives: a node silent for about 5 s is dead.
HEALTH_CHECKS = {"health_check_initial_delay_ms": 1000, "health_check_period_ms": 1000,
                 "health_check_timeout_ms": 3000, "health_check_failure_threshold": 5}


@pytest.fixture(scope="session")
def cluster():
    """A head node and a second node, two CPUs each, on this machine; this process its driver."""
    if Cluster is None:
        pytest.skip(MISSING)
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "_system_config": HEALTH_CHECKS})
    nodes.add_node(num_cpus=2)
    ray.init(address=nodes.address, include_dashboard=False)
    try:
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()


@pytest.fixture(scope="session")
def one_worker(tmp_path_factory):
    """The job's output from one worker (the local executor): what every parallel run must give."""
    from ray_jobs import output, run

    tmp = tmp_path_factory.mktemp("p1")
    result = run(tmp, 1, target="local")
    expected = output(tmp)
    assert all(len(rows) > 100 for rows in expected.values())
    return expected, result

"""Choosing the Ray executor: bad values are refused before the job starts, and without Ray
installed the error says how to install it. None of these needs Ray."""
from __future__ import annotations

import sys

import pytest

from weir.engine.connectors.options import DURATION_EXAMPLES
from weir.engine.errors import EngineError
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.shell.cli import _parser
from weir.shell.commands import _settings
from weir.sql import WeirSqlError, parse

JOB = """CREATE TABLE t (a BIGINT) WITH ('connector' = 'datagen', 'number-of-rows' = '10');
CREATE TABLE s (a BIGINT) WITH ('connector' = 'blackhole');
INSERT INTO s SELECT a FROM t;"""


@pytest.mark.parametrize("key, value, wanted", [
    ("execution.target", "yarn", "one of 'local', 'ray'"),
    ("ray.actor.num-cpus", "0", "a number greater than 0 such as '1' or '0.5'"),
    ("ray.actor.num-cpus", "many", "a number greater than 0 such as '1' or '0.5'"),
    ("jobmanager.scheduler", "reactive", "one of 'default', 'adaptive'"),
    ("slot.request.timeout", "0s", f"a duration greater than 0 such as {DURATION_EXAMPLES}"),
])
def test_a_bad_ray_setting_is_refused_naming_the_values_it_takes(key, value, wanted):
    with pytest.raises(WeirSqlError) as error:
        plan_script(parse(f"SET '{key}' = '{value}';\n" + JOB))
    assert error.value.problems[0].message == f"setting '{key}' must be {wanted}, not '{value}'"


def test_without_ray_installed_the_job_fails_before_it_starts_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    graph = plan_script(parse("SET 'execution.target' = 'ray';\n" + JOB)).graph
    with pytest.raises(EngineError) as error:
        run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    assert "Ray is not installed" in error.value.message
    assert error.value.hint == "pip install 'weir[ray]'"
    assert not (tmp_path / "state").exists()  # refused before the state directory was touched


def test_an_unknown_target_in_a_graph_is_refused_by_the_engine_too(tmp_path):
    graph = plan_script(parse(JOB)).graph
    graph.settings["execution.target"] = "yarn"
    with pytest.raises(EngineError, match="unknown execution target 'yarn'"):
        run_job(graph, JobOptions(state_dir=tmp_path / "state"))


def test_weir_run_flags_set_the_target_and_the_address():
    args = _parser().parse_args(["run", "job.sql", "--executor", "ray", "--ray-address", "auto"])
    assert _settings(args) == {"execution.target": "ray", "ray.address": "auto"}
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "job.sql", "--executor", "yarn"])

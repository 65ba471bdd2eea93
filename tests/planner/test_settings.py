"""Settings with a value outside their range are refused before the job starts."""
from __future__ import annotations

import pytest

from weir.planner.planner import plan_script
from weir.planner.settings import SETTINGS, check_setting
from weir.sql import WeirSqlError, parse

JOB = """CREATE TABLE t (a BIGINT) WITH ('connector' = 'blackhole');"""


@pytest.mark.parametrize("key, value, wanted", [
    ("weir.source.batch-size", "0", "an integer of at least 1"),
    ("weir.source.batch-size", "-5", "an integer of at least 1"),
    ("weir.source.batch-size", "lots", "an integer of at least 1"),
    ("execution.checkpointing.interval", "0s", "a duration greater than 0"),
    ("execution.checkpointing.interval", "0", "a duration greater than 0"),
    ("execution.checkpointing.interval", "soon", "a duration greater than 0"),
    ("parallelism.default", "0", "an integer of at least 1 and at most 32768"),
    ("pipeline.max-parallelism", "-1", "an integer of at least 1"),
    ("state.checkpoints.num-retained", "0", "an integer of at least 1"),
    ("restart-strategy.fixed-delay.attempts", "-1", "an integer of at least 0"),
    ("restart-strategy.type", "sometimes", "one of 'none', 'fixed-delay'"),
    ("state.backend", "rocks", "one of 'duckdb', 'memory'"),
    ("weir.checkpointing.interval-batches", "0", "an integer of at least 1"),
    ("weir.exchange.buffer-size", "0", "a size greater than 0"),
    ("taskmanager.memory.managed.size", "1mb", "a size of at least 64mb"),
    ("taskmanager.memory.managed.fraction", "0", "a fraction between 0 and 1"),
    ("taskmanager.memory.managed.fraction", "1.5", "a fraction between 0 and 1"),
])
def test_a_set_outside_the_range_names_the_key_the_range_and_points_at_the_value(key, value, wanted):
    statement = f"SET '{key}' = '{value}';\n"
    with pytest.raises(WeirSqlError) as error:
        plan_script(parse(statement + JOB))
    problem = error.value.problems[0]
    assert problem.message.startswith(f"setting '{key}' must be {wanted}")
    assert problem.message.endswith(f", not '{value}'")
    assert (problem.line, problem.col) == (1, statement.index(f"'{value}'") + 1)
    assert problem.hint.startswith(f"write for example SET '{key}' = '")


def test_settings_given_to_the_planner_are_checked_too():
    with pytest.raises(WeirSqlError, match="setting 'weir.source.batch-size' must be an integer of at least 1"):
        plan_script(parse(JOB), settings={"weir.source.batch-size": "0"})


@pytest.mark.parametrize("key, value", [
    ("weir.source.batch-size", "1"), ("execution.checkpointing.interval", "500ms"),
    ("execution.checkpointing.interval", "2min"), ("taskmanager.memory.managed.size", "512mb"),
    ("taskmanager.memory.managed.fraction", "0.25"), ("restart-strategy.fixed-delay.delay", "0s"),
    ("table.optimizer.agg-phase-strategy", "two_phase"), ("table.optimizer.reuse-sub-plan-enabled", "False"),
])
def test_values_in_range_are_accepted(key, value):
    assert check_setting(key, value=value) is None
    plan_script(parse(f"SET '{key}' = '{value}';\n" + JOB))


def test_every_default_is_a_valid_value():
    for key, setting in SETTINGS.items():
        if setting.default is not None:
            assert check_setting(key, value=setting.default) is None, key

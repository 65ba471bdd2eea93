"""The job settings a SET statement or the command line may change.

Keys follow Flink's configuration names. An unknown key is an error, so a
typo never silently leaves a setting at its default; so is a value outside a
key's range ('weir.source.batch-size' = '0', 'execution.checkpointing.interval'
= '0s'), before the job starts.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable

from weir.engine.checkpoint.location import location_problem
from weir.engine.connectors.options import DURATION_EXAMPLES, duration_micros, parse_size
from weir.engine.errors import EngineError
from weir.engine.state.memory import MIN_CONNECTION_BYTES
from weir.sql.errors import Problem


def _integer(minimum: int, maximum: int | None = None) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or number < minimum or (maximum is not None and number > maximum):
            upper = f" and at most {maximum}" if maximum is not None else ""
            return f"an integer of at least {minimum}{upper}"
        return None
    check.example = str(max(minimum, 1))
    return check


def _duration(*, positive: bool) -> Callable[[str], str | None]:
    """A duration in Flink's syntax (``engine.connectors.options.parse_duration``)."""
    wanted = ("a duration greater than 0" if positive else "a duration") + f" such as {DURATION_EXAMPLES}"

    def check(value: str) -> str | None:
        try:
            micros = duration_micros(value)
        except ValueError as reason:
            return f"{wanted} ({reason}; a bare number is milliseconds)"
        return wanted if positive and micros == 0 else None
    check.example = "5s"
    return check


def _size(minimum: int) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            size = parse_size("", value)
        except EngineError:
            size = None
        if size is None or size < minimum:
            return f"a size of at least {minimum >> 20}mb such as '256mb' or '1gb'" if minimum >= 1 << 20 \
                else "a size greater than 0 such as '32mb' or '1048576'"
        return None
    check.example = "256mb"
    return check


def _fraction(value: str) -> str | None:
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    return None if 0.0 < fraction < 1.0 else "a fraction between 0 and 1 (exclusive)"


_fraction.example = "0.4"


def _positive_number(value: str) -> str | None:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    return None if number > 0 else "a number greater than 0 such as '1' or '0.5'"


_positive_number.example = "1"


def _one_of(*choices: str, case: bool = True) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        text = value.strip() if case else value.strip().upper()
        return None if text in choices else "one of " + ", ".join(f"'{c}'" for c in choices)
    check.example = choices[0]
    return check


def _location(value: str) -> str | None:
    """A directory or a filesystem URI (``engine.checkpoint.location``), checked without reaching it."""
    return location_problem(value)


_location.example = "s3://bucket/checkpoints"


@dataclass(frozen=True)
class Setting:
    default: str | None
    description: str
    #: What is wrong with a value ('an integer of at least 1'), or None when it is valid.
    check: Callable[[str], str | None] | None = None


SETTINGS: dict[str, Setting] = {
    "pipeline.name": Setting(None, "the job's name (default: the SQL file's name)"),
    "parallelism.default": Setting("1", "subtasks per keyed operator", _integer(1, 32768)),
    "pipeline.max-parallelism": Setting("128", "number of key groups", _integer(1, 32768)),
    "execution.checkpointing.interval": Setting(
        None, "checkpoint every this long, e.g. '5s' (unset: every 1s for a job over an unbounded source "
              "with a materialized view or a transactional sink, else only at the end)", _duration(positive=True)),
    "execution.checkpointing.timeout": Setting("10min", "a checkpoint not complete after this long is aborted",
                                               _duration(positive=True)),
    "state.backend": Setting("duckdb", "'duckdb' or 'memory'", _one_of("duckdb", "memory")),
    "state.checkpoints.num-retained": Setting("3", "completed checkpoints kept", _integer(1)),
    "restart-strategy.type": Setting("none", "'none' or 'fixed-delay'",
                                     _one_of("none", "fixed-delay", "disable", "off")),
    "restart-strategy.fixed-delay.attempts": Setting("3", "restarts before giving up", _integer(0)),
    "restart-strategy.fixed-delay.delay": Setting("1s", "pause before a restart", _duration(positive=False)),
    "table.exec.state.ttl": Setting("0", "idle state retention for updating operators",
                                    _duration(positive=False)),
    "table.optimizer.agg-phase-strategy": Setting(
        "AUTO", "'AUTO'/'TWO_PHASE': window aggregates pre-aggregate before a parallel exchange; "
                "'ONE_PHASE': they do not", _one_of("AUTO", "TWO_PHASE", "ONE_PHASE", case=False)),
    "table.optimizer.reuse-sub-plan-enabled": Setting(
        "true", "'true': a window aggregate that repeats another (same input, windows, keys, aggregates) "
                "runs once, the second reading the first's output", _one_of("TRUE", "FALSE", case=False)),
    "table.exec.source.idle-timeout": Setting("0", "a split with no data this long stops holding the watermark",
                                              _duration(positive=False)),
    "sql-client.execution.result-mode": Setting("table", "'table', 'changelog' or 'tableau' (the shell checks it)"),
    "weir.source.batch-size": Setting("65536", "rows per batch read from a source", _integer(1)),
    "weir.source.merge-bytes": Setting(
        "8MB", "a bounded source's consecutive batches are merged up to this size (0: never; "
                "default 0 when 'weir.source.batch-size' is set)", _size(0)),
    "weir.checkpointing.interval-batches": Setting(
        None, "checkpoint every this many source batches (deterministic, for tests)", _integer(1)),
    "weir.exchange.buffer-size": Setting(
        "32MB", "bytes queued for another worker: past it a worker reads no source batch and a send waits", _size(1)),
    "taskmanager.memory.managed.size": Setting(
        None, "memory for state tables (DuckDB) of the whole job, e.g. '512mb'; beyond it state spills "
              "to the state directory (default: the fraction below of the cgroup or machine memory)",
        _size(MIN_CONNECTION_BYTES)),
    "taskmanager.memory.managed.fraction": Setting(
        "0.4", "share of the cgroup (container) or machine memory for state tables, when no size is set",
        _fraction),
    "execution.savepoint.path": Setting(None, "start the next job from this savepoint"),
    "python.udf.bad-rows.table": Setting(
        None, "keep the rows a Python UDF raises on in this table (of the job's database) instead of failing"),
    "state.checkpoints.dir": Setting(
        None, "where checkpoints go, every node reaching it: a directory or a filesystem URI ('file:///shared/chk', "
              "'s3://bucket/chk?endpoint_override=host:port&scheme=http'); the job's go in <dir>/<job name>/ "
              "(default: the state directory, .weir/<job name>)", _location),
    "state.savepoints.dir": Setting(
        None, "where savepoints go when no path is given: a directory or a filesystem URI; the job's go in "
              "<dir>/<job name>/ (default: beside the checkpoints)", _location),
    "execution.target": Setting("local", "where the workers run: 'local' (processes of this machine) or 'ray' "
                                         "(actors of a Ray cluster: pip install 'weir[ray]')",
                                _one_of("local", "ray")),
    "ray.address": Setting(None, "the Ray cluster of 'execution.target' = 'ray': 'auto' (started with "
                                 "`ray start`), 'ray://host:10001' or host:port (unset: RAY_ADDRESS, else a "
                                 "new Ray on this machine)"),
    "ray.actor.num-cpus": Setting("1", "CPUs Ray reserves for each worker actor", _positive_number),
    "jobmanager.scheduler": Setting(
        "default", "'adaptive': a Ray job (re)starts at the parallelism its cluster's live nodes have room "
                   "for, at most 'parallelism.default' (after a lost node: on the rest); 'default': at "
                   "'parallelism.default' or not at all", _one_of("default", "adaptive")),
    "slot.request.timeout": Setting("2min", "how long a Ray job waits for the cluster to place its worker actors",
                                    _duration(positive=True)),
}


def check_setting(key: str, line: int | None = None, col: int | None = None, *,
                  value: str | None = None) -> Problem | None:
    """A problem with ``key`` (unknown) or with its ``value`` (outside the key's range), or None."""
    setting = SETTINGS.get(key)
    if setting is None:
        close = difflib.get_close_matches(key, SETTINGS, n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"known settings: {', '.join(sorted(SETTINGS))}"
        return Problem(f"unknown setting '{key}'", line, col, hint)
    if value is None or setting.check is None:
        return None
    wanted = setting.check(value)
    if wanted is None:
        return None
    return Problem(f"setting '{key}' must be {wanted}, not '{value}'", line, col,
                   f"write for example SET '{key}' = '{setting.default or setting.check.example}'")

"""The job settings a SET statement or the command line may change.

Keys follow Flink's configuration names. An unknown key is an error, so a
typo never silently leaves a setting at its default.
"""
from __future__ import annotations

import difflib

from sql.errors import Problem

#: key -> (default, description)
SETTINGS: dict[str, tuple[str | None, str]] = {
    "pipeline.name": (None, "the job's name (default: the SQL file's name)"),
    "parallelism.default": ("1", "subtasks per keyed operator"),
    "pipeline.max-parallelism": ("128", "number of key groups"),
    "execution.checkpointing.interval": (None, "checkpoint every this long, e.g. '5s'"),
    "state.backend": ("duckdb", "'duckdb' or 'memory'"),
    "state.checkpoints.num-retained": ("3", "completed checkpoints kept"),
    "restart-strategy.type": ("none", "'none' or 'fixed-delay'"),
    "restart-strategy.fixed-delay.attempts": ("3", "restarts before giving up"),
    "restart-strategy.fixed-delay.delay": ("1s", "pause before a restart"),
    "table.exec.state.ttl": ("0", "idle state retention for updating operators"),
    "table.optimizer.agg-phase-strategy": ("AUTO", "'AUTO'/'TWO_PHASE': window aggregates pre-aggregate before a parallel exchange; 'ONE_PHASE': they do not"),
    "table.exec.source.idle-timeout": ("0", "a split with no data this long stops holding the watermark"),
    "sql-client.execution.result-mode": ("table", "'table', 'changelog' or 'tableau'"),
    "weir.source.batch-size": ("65536", "rows per batch read from a source"),
    "weir.checkpointing.interval-batches": (None, "checkpoint every this many source batches (deterministic, for tests)"),
    "weir.exchange.buffer-size": ("32MB", "bytes queued for another worker before a worker stops reading its sources"),
    "execution.savepoint.path": (None, "start the next job from this savepoint"),
    "state.checkpoints.dir": (None, "the job's state directory (default .weir/<job name>)"),
}


def check_setting(key: str, line: int | None = None, col: int | None = None) -> Problem | None:
    if key in SETTINGS:
        return None
    close = difflib.get_close_matches(key, SETTINGS, n=1)
    hint = f"did you mean '{close[0]}'?" if close else f"known settings: {', '.join(sorted(SETTINGS))}"
    return Problem(f"unknown setting '{key}'", line, col, hint)

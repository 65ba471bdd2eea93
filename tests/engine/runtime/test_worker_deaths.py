"""A worker of a parallel job killed at every wait of its coordinator: barrier alignment,
checkpoint commit, shutdown (start-up is ``test_state_dir.py``'s).

Each case kills worker 1 (``WEIR_FAULT=<point>:<n>@1``) at parallelism 2, with a checkpoint
after every source batch:

- with no restart strategy the job fails at once with an error naming the dead worker;
- with a restart strategy the job restarts from its latest checkpoint by itself
  (``WEIR_FAULT_ONCE``: the fault fires once, not again in the restarted workers) and
  ends with exactly that output.

Every run is guarded by a thread join (a guard against a hang, not a measure).
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from weir.engine.errors import EngineError
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

from jobs import KEY_WINDOWS_JOB, KEY_WINDOWS_ORACLE, outcome_within

JOB = KEY_WINDOWS_JOB + ("CREATE MATERIALIZED VIEW key_totals AS "
                         "SELECT k, COUNT(*) AS cnt, SUM(v) AS total FROM events GROUP BY k;\n")
TOTALS = ("SELECT k, COUNT(*) AS cnt, SUM(v) AS total FROM read_csv('{data}/*.csv', header = true) "
          "GROUP BY ALL ORDER BY ALL")
PARALLEL = {"parallelism.default": "2", "weir.source.batch-size": "2", "weir.checkpointing.interval-batches": "1"}
RESTART = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
           "restart-strategy.fixed-delay.delay": "0s"}
#: Fault -> where worker 1 dies: mid-alignment of a barrier at its window aggregate (two
#: channels), after a sink's commit of a checkpoint, after its final commit before it reports.
KILLS = {"alignment": "align:2@1", "commit": "commit:2@1", "shutdown": "shutdown:1@1"}
GUARD_SECONDS = 120


@pytest.fixture
def job(tmp_path: Path) -> Path:
    (tmp_path / "events").mkdir()
    for part in range(2):  # two splits: each worker reads one, and barriers cross both ways
        rows = "".join(f"2024-01-01 00:00:{2 * i:02d},{'abc'[i % 3]},{i}\n" for i in range(part, 24, 2))
        (tmp_path / "events" / f"part-{part}.csv").write_text("ts,k,v\n" + rows)
    return tmp_path


def run_guarded(tmp: Path, warnings: list | None = None, **settings: str):
    """``run_job`` in a thread: its result, or the error it raised. Fails if it hangs."""
    sql = JOB.format(data=tmp / "events", out=tmp / "out")
    graph = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings={**PARALLEL, **settings}).graph
    options = JobOptions(state_dir=tmp / "state", warn=(warnings if warnings is not None else []).append)
    return outcome_within(GUARD_SECONDS, lambda: run_job(graph, options), "the coordinator hung on a dead worker")


def assert_exact(tmp: Path) -> None:
    windows = duckdb.sql(f"SELECT * FROM read_csv('{tmp / 'out'}/*.csv') ORDER BY ALL").fetchall()
    assert windows == duckdb.sql(KEY_WINDOWS_ORACLE.format(files=f"{tmp / 'events'}/*.csv")).fetchall()
    with duckdb.connect(str(tmp / "views.duckdb"), read_only=True) as con:
        totals = con.sql("SELECT * FROM key_totals ORDER BY ALL").fetchall()
    assert totals == duckdb.sql(TOTALS.format(data=tmp / "events")).fetchall()


@pytest.mark.parametrize("wait", list(KILLS))
def test_a_worker_killed_without_a_restart_strategy_fails_the_job_naming_it(job, wait, monkeypatch):
    monkeypatch.setenv("WEIR_FAULT", KILLS[wait])  # read by the spawned workers
    failed = run_guarded(job)
    assert isinstance(failed, EngineError), failed
    assert failed.message.startswith("worker 1 of job ") and failed.message.endswith(" died (killed by SIGKILL)")
    assert "resumes from its latest checkpoint" in failed.hint


@pytest.mark.parametrize("wait", list(KILLS))
def test_a_worker_killed_restarts_the_job_to_exact_output(job, wait, monkeypatch):
    monkeypatch.setenv("WEIR_FAULT", KILLS[wait])
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(job / "fired"))
    warnings: list[str] = []
    result = run_guarded(job, warnings, **RESTART)
    assert not isinstance(result, BaseException), result
    assert (job / "fired").exists(), "the fault never fired"
    assert len(warnings) == 1 and "worker 1 of job" in warnings[0] and "restarting" in warnings[0]
    assert_exact(job)

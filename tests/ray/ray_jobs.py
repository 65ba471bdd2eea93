"""The job every Ray test runs (a tumble into files, a session window and an updating GROUP BY
into views) and how to run it and read its output; the cluster is conftest.py's."""
from __future__ import annotations

from pathlib import Path

from bids_job import JOB, output  # noqa: F401 (output: the Ray tests read it from here)

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

EVENTS = 8_000
#: A rate at which a killed run still has about 2 s of events to read (the random kills' test; a
#: test that must kill mid-job pauses the first run's sources instead: ``pause_the_first_run``).
PACED = 4_000
#: Checkpoints go on while no source reads (a run paused by ``pause_the_first_run``).
EVERY_100_MS = {"execution.checkpointing.interval": "100ms"}
#: weir's restart strategy, restarting at once, as often as a test kills.
RESTARTS = {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "4",
            "restart-strategy.fixed-delay.delay": "0s"}


def run(tmp: Path, parallelism: int, *, target: str = "ray", events: int | None = EVENTS, batch_size: int = 600,
        rate: int | None = None, settings: dict | None = None, **options):
    """Run the job; at a ``rate`` (nexmark's 'rate', events per second of wall clock), its sources
    cannot run ahead of the checkpoints: ``EVENTS / rate`` seconds after a kill at an early
    checkpoint are still to come, however loaded the machine."""
    bounds = (f", 'events' = '{events}'" if events else "") + (f", 'rate' = '{rate}'" if rate else "")
    sql = JOB.format(events=bounds, out=tmp / "out")
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": str(batch_size),
                "weir.checkpointing.interval-batches": "4", "execution.target": target, **(settings or {})}
    script = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings)
    return run_job(script.graph, JobOptions(state_dir=tmp / "state", **options))


def pause_the_first_run(monkeypatch, tmp: Path) -> Path:
    """Worker 0's sources read nothing after their 2nd batch in the job's first run (``batch:2:stall``,
    once): that run cannot end, so a kill at one of its checkpoints (taken at an interval of time:
    ``EVERY_100_MS``) lands mid-job however slow the machine. Paced sources were not enough: on a
    loaded machine every worker had read everything by checkpoint 2, and a node killed then went
    unnoticed until the job had ended. Returns the file that says the pause came."""
    fired = tmp / "paused"
    monkeypatch.setenv("WEIR_FAULT", "batch:2:stall@0")  # worker 0 reads split 0 (the source has two)
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(fired))
    return fired


def restarts(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "restarting from its latest checkpoint" in w]

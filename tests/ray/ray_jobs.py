"""The job every Ray test runs (a tumble into files, a session window and an updating GROUP BY
into views) and how to run it and read its output; the cluster is conftest.py's."""
from __future__ import annotations

from pathlib import Path

from bids_job import JOB, output  # noqa: F401 (output: the Ray tests read it from here)

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

EVENTS = 8_000
#: The rate of a test that kills at an early checkpoint: a kill at checkpoint 2 (0.2 s of events in,
#: at batches of 200) comes with about 1.8 s of the job to come, not after a loaded machine's
#: sources have read everything (then no restart comes).
PACED = 4_000
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


def restarts(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "restarting from its latest checkpoint" in w]

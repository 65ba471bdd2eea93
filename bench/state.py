"""Benchmark: the state a long-running updating query holds, with and without state TTL.

    python bench/state.py [--query q9] [--events 3000000] [--ttl '5 s'] [--every 2] [--ttl-only]

Runs ``examples/nexmark/<query>.sql`` (q9: a regular join of auctions and bids, then
the winning bid per auction; q4: the same join, then GROUP BY twice) in this process
over ``--events`` Nexmark events, twice: without state retention, and with
``SET 'table.exec.state.ttl' = <ttl>``. Every ``--every`` seconds it prints the rows
each stateful operator holds (from its snapshot), so one sees the state grow with the
input without TTL and level off with it. TTL is processing time, as in Flink: a row
is dropped that long after it arrived, so the level depends on the speed of the
machine — rows per second times the TTL.
"""
from __future__ import annotations

import argparse
import os
import re
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples" / "nexmark"


def job_text(query: str, events: int, rate: int) -> str:
    ddl = (EXAMPLES / "ddl.sql").read_text()
    ddl = re.sub(r"'events' = '\d+'", f"'events' = '{events}'", ddl)
    ddl = re.sub(r"'first-event.rate' = '\d+'", f"'first-event.rate' = '{rate}'", ddl)
    return ddl + "\n" + (EXAMPLES / f"{query}.sql").read_text()


def state_rows(executor) -> dict[str, int]:
    """Rows in the state tables of each stateful operator (sources and calcs have none)."""
    out = {}
    for task_id, task in executor.tasks.items():
        operator = getattr(task, "operator", None)
        if operator is None:
            continue
        snapshot = operator.snapshot()
        if isinstance(snapshot, dict) and snapshot.get("tables") is not None:
            out[task_id] = sum(t.num_rows for t in snapshot["tables"].values())
    return out


def run(query: str, events: int, rate: int, ttl: str | None, every: float) -> None:
    from weir.engine.runtime.job import JobOptions, run_job
    from weir.planner.planner import plan_script
    from weir.sql import parse

    settings = {"table.exec.state.ttl": ttl} if ttl else {}
    script = plan_script(parse(job_text(query, events, rate)), settings=settings)
    executors = []
    started = time.perf_counter()
    print(f"\n{query}, {events:,} events, state TTL {ttl or 'none'}")

    def sample(progress) -> None:
        rows = state_rows(executors[0])
        if not hasattr(sample, "header"):
            sample.header = list(rows)
            print("  seconds  events read  " + "  ".join(f"{name:>28}" for name in sample.header))
        print(f"  {time.perf_counter() - started:7.1f}  {progress.rows_read:11,}  "
              + "  ".join(f"{rows.get(name, 0):>28,}" for name in sample.header))

    with tempfile.TemporaryDirectory() as work:
        os.chdir(work)
        run_job(script.graph, JobOptions(state_dir=Path(work) / "state", on_progress=sample, progress_interval=every,
                                         on_executor=executors.append))
    print(f"  finished in {time.perf_counter() - started:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--query", default="q9")
    parser.add_argument("--events", type=int, default=3_000_000)
    parser.add_argument("--rate", type=int, default=10_000, help="'first-event.rate'")
    parser.add_argument("--ttl", default="5 s", help="'table.exec.state.ttl' for the second run")
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--ttl-only", action="store_true", help="only the run with state TTL (for long runs)")
    args = parser.parse_args()
    for ttl in ((args.ttl,) if args.ttl_only else (None, args.ttl)):
        run(args.query, args.events, args.rate, ttl, args.every)


if __name__ == "__main__":
    main()

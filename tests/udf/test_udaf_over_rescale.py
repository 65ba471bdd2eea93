"""A job of Python aggregate functions OVER windows fails at a fixed point (``engine.faults``, no
restart) and is resumed from its latest checkpoint at another parallelism, 1 -> 2 and 2 -> 1: the
accumulators in the checkpoint (``over_accumulators``) are split or merged by key group, and the
output is exactly DuckDB's window functions over the same rows.

The fault points are counts, not times: at parallelism 1 the 3rd source batch raises (checkpoint 2,
taken after batch 2, is the latest); at parallelism 2 the coordinator raises as it commits the
first sink of checkpoint 1 (durable: the latest). The resumed run reads some rows and fewer than
the input holds: it restored mid-way, and its accumulators went on from the checkpoint's.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from test_udaf_over import KILLED_JOB  # its two views; this job adds an unbounded frame
from test_udaf_over import ORACLES as KILLED_ORACLES

from weir.engine.errors import EngineError
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = KILLED_JOB + """
CREATE MATERIALIZED VIEW running AS SELECT k, ts, v, arrowsum(v) OVER (PARTITION BY k ORDER BY ts) AS total
FROM events;
"""
ORACLES = {
    **KILLED_ORACLES,
    "running": "SELECT k, ts, v, SUM(v) OVER (PARTITION BY k ORDER BY ts) FROM read_csv('{files}', header = true) "
               "ORDER BY ALL",
}
SPLITS, TIMES = 2, 40


def write_events(directory: Path) -> int:
    """Two splits in time order (no row is late), some rows twice, five keys; the number of rows."""
    directory.mkdir()
    total = 0
    for part in range(SPLITS):
        rows = [f"2024-01-01 00:00:{i:02d},{'abcde'[i * 7 % 5]},{i * 5 % 11 - 3}\n" for i in range(part, TIMES, SPLITS)
                for _ in range(1 + (i % 4 == 0))]
        (directory / f"part-{part}.csv").write_text("ts,k,v\n" + "".join(rows))
        total += len(rows)
    return total


def run(tmp: Path, parallelism: int):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "2",
                "weir.checkpointing.interval-batches": "1", "restart-strategy.type": "none"}
    graph = plan_script(parse(JOB.format(data=tmp / "events")), db_path=str(tmp / "v.duckdb"), settings=settings).graph
    return run_job(graph, JobOptions(state_dir=tmp / "state"))


def views(db: Path) -> dict[str, list]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {name: con.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in ORACLES}


@pytest.mark.parametrize("first, then", [(1, 2), (2, 1)])
def test_over_accumulators_rescale_from_a_checkpoint_taken_at_a_fixed_batch(tmp_path: Path, inject_fault, first, then):
    total = write_events(tmp_path / "events")
    # this process runs the job (p=1) or its coordinator (p=2; the spawned workers have no fault)
    point, n = ("batch", 3) if first == 1 else ("commit", 1)
    inject_fault((point, n, "raise"))
    with pytest.raises(EngineError, match=f"injected fault at {point} #{n}"):
        run(tmp_path, first)
    inject_fault(None)
    checkpoints = sorted((tmp_path / "state").rglob("chk-*"))
    assert checkpoints, "no checkpoint was completed before the fault"

    resumed = run(tmp_path, then)
    assert 0 < resumed.rows_read < total, "the resumed run restored its progress, not started over"
    files = f"{tmp_path / 'events'}/*.csv"
    found = views(tmp_path / "v.duckdb")
    for name, oracle in ORACLES.items():
        assert found[name] and found[name] == duckdb.sql(oracle.format(files=files)).fetchall(), name

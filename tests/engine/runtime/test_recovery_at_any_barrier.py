"""Restoring at any barrier never changes the result.

A hand-built job (a csv source, a keyed window aggregate, a DuckDB table sink
and a csv part-file sink) runs through ``run_job`` with a checkpoint after
every batch and a restart strategy; it fails at chosen batch boundaries and
restarts from whichever checkpoint completed last. Whatever the input order
(late rows included), the batch size and the failures, both sinks end with
exactly the rows of a run that never failed, and no in-progress file is left.
"""
from __future__ import annotations

from pathlib import Path
from unittest import mock

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine import faults
from weir.engine.errors import EngineError
from weir.engine.graph import Edge, JobGraph, OperatorNode
from weir.engine.runtime.job import JobOptions, run_job

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64()), ("ts", pa.timestamp("us"))])
OUT = pa.schema([("k", pa.string()), ("window_start", pa.timestamp("us")), ("n", pa.int64()), ("total", pa.int64())])


def job(directory: Path, *, batch_size: int) -> JobGraph:
    graph = JobGraph("recovery")
    graph.settings = {
        "weir.checkpointing.interval-batches": "1",
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "10",
        "restart-strategy.fixed-delay.delay": "0s",
    }
    graph.add(OperatorNode("t.source", "source", {
        "options": {"connector": "filesystem", "path": str(directory / "in.csv"), "format": "csv"},
        "watermark": "ts - INTERVAL '2' SECOND", "batch_size": batch_size,
    }, SCHEMA))
    graph.add(OperatorNode("out.window_aggregate", "window_aggregate", {
        "window": {"kind": "tumble", "time_column": "ts", "size": 10_000_000, "offset": 0},
        "keys": [["k", '"k"']],
        "aggregates": [{"name": "_agg0", "function": "count", "argument": None, "distinct": False, "filter": None},
                       {"name": "_agg1", "function": "sum", "argument": '"v"', "distinct": False, "filter": None}],
        "having": None,
        "projection": [["k", '"k"'], ["window_start", "window_start"], ["n", "_agg0"], ["total", "_agg1"]],
    }, OUT, [Edge("t.source", "hash", ("k",))]))
    graph.add(OperatorNode("out.sink", "sink", {"options": {
        "connector": "duckdb", "path": str(directory / "r.duckdb"), "table-name": "out", "sink.mode": "replace"}},
        OUT, [Edge("out.window_aggregate")]))
    graph.add(OperatorNode("files.sink", "sink", {"options": {
        "connector": "filesystem", "path": str(directory / "files"), "format": "csv"}},
        OUT, [Edge("out.window_aggregate")]))
    return graph


def write_input(directory: Path, rows: list[tuple[str, int, int]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(pa.table({"k": [r[0] for r in rows], "v": [r[1] for r in rows],
                              "ts": pa.array([r[2] for r in rows], pa.timestamp("s"))}), directory / "in.csv")


def output(directory: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect()
    con.execute(f"ATTACH '{directory / 'r.duckdb'}' AS job (READ_ONLY)")
    table = con.sql("SELECT k, epoch(window_start)::BIGINT, n, total FROM job.out").fetchall()
    parts = [str(p) for p in (directory / "files").iterdir() if not p.name.startswith((".", "_"))]  # _weir_log: the commit log
    files = con.sql("SELECT k, epoch(window_start)::BIGINT, n, total FROM read_csv($f)", params={"f": parts}) \
        .fetchall() if parts else []
    hidden = [p.name for p in (directory / "files").iterdir() if p.name.startswith(".")]
    con.close()
    return {"table": sorted(table), "files": sorted(files), "in-progress files": hidden}


def run(directory: Path, batch_size: int, failures: dict[str, set[int]]) -> tuple[dict[str, list[tuple]], list[str]]:
    """Run the job, failing (with an EngineError, so that the restart strategy applies)
    the n-th time it reaches a fault point, for each n in ``failures[point]``, counted
    over the whole run; return the output and the warnings."""
    reached: dict[str, int] = {}

    def reach(point: str) -> None:
        reached[point] = reached.get(point, 0) + 1
        if reached[point] in failures.get(point, ()):
            raise EngineError(f"failure at {point} #{reached[point]}")

    warnings: list[str] = []
    with mock.patch.object(faults, "reach", reach):
        run_job(job(directory, batch_size=batch_size), JobOptions(state_dir=directory / "state", warn=warnings.append))
    return output(directory), warnings


def test_a_failure_between_two_sinks_commits_keeps_the_output_of_the_completed_checkpoint(tmp_path):
    """Both rows are in batch 1, whose watermark (40 s) fires b's window: checkpoint 1 holds
    its row for both sinks. The job fails after the first sink committed checkpoint 1 and
    restarts from it: the second sink must still publish checkpoint 1's row."""
    rows = [("b", 43, 10), ("a", 85, 42)]
    write_input(tmp_path / "reference", rows)
    write_input(tmp_path / "failing", rows)

    reference, _ = run(tmp_path / "reference", 2, {})
    recovered, warnings = run(tmp_path / "failing", 2, {"commit": {1}})

    assert any("failure at commit #1" in w for w in warnings), warnings
    assert reference["table"] == [("a", 40, 1, 85), ("b", 10, 1, 43)]
    assert recovered == reference


ROWS = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 99), st.integers(0, 59)), min_size=1, max_size=30)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=ROWS, batch_size=st.integers(1, 4), fail_at=st.sets(st.integers(1, 20), max_size=3))
def test_failing_at_any_batch_boundary_and_restoring_gives_the_same_output(tmp_path_factory, rows, batch_size,
                                                                           fail_at):
    reference_dir, failing_dir = tmp_path_factory.mktemp("reference"), tmp_path_factory.mktemp("failing")
    write_input(reference_dir, rows)
    write_input(failing_dir, rows)

    reference, _ = run(reference_dir, batch_size, {})
    recovered, warnings = run(failing_dir, batch_size, {"batch": fail_at})

    assert recovered == reference
    assert reference["table"] == reference["files"]
    reached = {n for n in fail_at if n <= len(rows) // batch_size}  # surely reached: a boundary per full batch
    assert sum("restarting from its latest checkpoint" in w for w in warnings) >= len(reached), warnings

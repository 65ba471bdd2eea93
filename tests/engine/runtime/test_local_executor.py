"""The local executor runs a hand-built JobGraph: batches, watermarks, errors."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from weir.engine.errors import EngineError
from weir.engine.graph import Edge, JobGraph, OperatorNode
from weir.engine.runtime.local import LocalExecutor

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64()), ("ts", pa.timestamp("us"))])
OUT = pa.schema([("k", pa.string()), ("window_start", pa.timestamp("us")), ("n", pa.int64()), ("total", pa.int64())])


def write_csv(path, rows):
    table = pa.table({"k": [r[0] for r in rows], "v": [r[1] for r in rows],
                      "ts": pa.array([r[2] for r in rows], pa.timestamp("s"))})
    pacsv.write_csv(table, path)


def job(tmp_path, source_path, *, batch_size=2, delay_s=1) -> JobGraph:
    graph = JobGraph("test")
    graph.add(OperatorNode("t.source", "source", {
        "options": {"connector": "filesystem", "path": str(source_path), "format": "csv"},
        "watermark": f"ts - INTERVAL '{delay_s}' SECOND", "batch_size": batch_size,
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
        "connector": "duckdb", "path": str(tmp_path / "r.duckdb"), "table-name": "out", "sink.mode": "replace"}},
        OUT, [Edge("out.window_aggregate")]))
    return graph


def result(tmp_path):
    con = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
    try:
        return con.sql("SELECT k, epoch(window_start)::BIGINT, n, total FROM out ORDER BY ALL").fetchall()
    finally:
        con.close()


def test_rows_reach_the_sink_and_late_rows_are_counted(tmp_path):
    rows = [("a", 1, 1), ("b", 2, 3), ("a", 3, 12), ("a", 4, 14),  # watermark 13 fires [0, 10)
            ("b", 5, 5),  # late: its window fired
            ("b", 6, 25)]
    write_csv(tmp_path / "in.csv", rows)
    outcome = LocalExecutor(job(tmp_path, tmp_path / "in.csv")).run()
    assert result(tmp_path) == [("a", 0, 1, 1), ("a", 10, 2, 7), ("b", 0, 1, 2), ("b", 20, 1, 6)]
    assert outcome.rows_read == 6
    assert outcome.counter("late_rows_dropped") == 1
    metrics = {m.id: m for m in outcome.operators}
    assert metrics["out.window_aggregate"].rows_in == 6
    assert metrics["out.window_aggregate"].rows_out == 4
    assert metrics["out.sink"].rows_in == 4


def test_a_split_behind_holds_the_watermark_back(tmp_path):
    # Two files read round-robin: the slow file keeps window [0, 10) open for its row at 8 s.
    (tmp_path / "in").mkdir()
    write_csv(tmp_path / "in" / "1.csv", [("a", 1, 1), ("a", 1, 30), ("a", 1, 40)])
    write_csv(tmp_path / "in" / "2.csv", [("a", 1, 2), ("a", 1, 3), ("a", 1, 8)])
    outcome = LocalExecutor(job(tmp_path, tmp_path / "in", batch_size=1)).run()
    assert outcome.counter("late_rows_dropped") == 0
    assert result(tmp_path) == [("a", 0, 4, 4), ("a", 30, 1, 1), ("a", 40, 1, 1)]


def test_progress_is_reported_with_rows_and_watermark(tmp_path):
    write_csv(tmp_path / "in.csv", [("a", 1, t) for t in range(50)])
    seen = []
    LocalExecutor(job(tmp_path, tmp_path / "in.csv"), on_progress=seen.append, progress_interval=0).run()
    assert seen[-1].rows_read == 50
    marks = [p.watermark for p in seen]
    assert marks == sorted(marks)
    assert 48_000_000 in marks  # 49 s - 1 s delay, before the final watermark
    assert [p.rows_read for p in seen] == sorted(p.rows_read for p in seen)


def test_a_failing_source_names_its_operator(tmp_path):
    with pytest.raises(EngineError) as raised:
        LocalExecutor(job(tmp_path, tmp_path / "missing.csv")).run()
    assert raised.value.operator_id == "t.source"
    assert "missing.csv" in str(raised.value)


def test_cancel_stops_the_job_and_commits_nothing(tmp_path):
    from weir.engine.errors import JobCancelled

    write_csv(tmp_path / "in.csv", [("a", 1, t) for t in range(50)])
    executor = LocalExecutor(job(tmp_path, tmp_path / "in.csv"), on_progress=lambda p: executor.cancel(),
                             progress_interval=0)
    with pytest.raises(JobCancelled):
        executor.run()
    con = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
    try:
        assert con.sql("SELECT count(*) FROM out").fetchall() == [(0,)]
    finally:
        con.close()

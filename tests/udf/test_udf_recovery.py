"""A job calling Python UDFs at parallelism 2: its worker processes import the functions by module
name, and after worker 1 is killed (SIGKILL, mid-alignment of a checkpoint barrier) the restarted
workers import them again and the job ends with exactly the output of the same job written with
built-in functions (a DuckDB oracle over the input files)."""
from __future__ import annotations

import threading
from pathlib import Path

import duckdb

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE FUNCTION shout AS 'udf_functions.shout' LANGUAGE PYTHON;
CREATE FUNCTION twice AS 'udf_functions.twice' LANGUAGE PYTHON;
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
CREATE TABLE key_windows (k VARCHAR, window_start TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO key_windows SELECT shout(k), window_start, COUNT(*), SUM(twice(v))
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) WHERE twice(v) > 4
GROUP BY shout(k), window_start, window_end;
"""
ORACLE = ("SELECT upper(k) || '!' AS k, time_bucket(INTERVAL '10 seconds', ts) AS window_start, COUNT(*) AS cnt, "
          "SUM(v * 2) AS total FROM read_csv('{files}', header = true) WHERE v * 2 > 4 GROUP BY ALL ORDER BY ALL")
SETTINGS = {"parallelism.default": "2", "weir.source.batch-size": "2", "weir.checkpointing.interval-batches": "1",
            "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "1",
            "restart-strategy.fixed-delay.delay": "0s"}
GUARD_SECONDS = 180


def test_udfs_at_parallelism_2_survive_a_killed_worker_with_exact_output(tmp_path: Path, monkeypatch):
    (tmp_path / "events").mkdir()
    for part in range(2):  # two splits: each worker reads one
        rows = "".join(f"2024-01-01 00:00:{2 * i:02d},{'abc'[i % 3]},{i}\n" for i in range(part, 24, 2))
        (tmp_path / "events" / f"part-{part}.csv").write_text("ts,k,v\n" + rows)
    monkeypatch.setenv("WEIR_FAULT", "align:2@1")  # read by the spawned workers
    monkeypatch.setenv("WEIR_FAULT_ONCE", str(tmp_path / "fired"))
    sql = JOB.format(data=tmp_path / "events", out=tmp_path / "out")
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb"), settings=SETTINGS).graph
    assert [f["name"] for f in graph.functions] == ["shout", "twice"]
    warnings: list[str] = []
    outcome: list = []

    def target() -> None:
        try:
            outcome.append(run_job(graph, JobOptions(state_dir=tmp_path / "state", warn=warnings.append)))
        except BaseException as error:  # noqa: BLE001 - returned to the test
            outcome.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(GUARD_SECONDS)  # a guard against a hang, not a measure
    assert not thread.is_alive(), "the job hung"
    assert not isinstance(outcome[0], BaseException), outcome[0]
    assert (tmp_path / "fired").exists(), "the fault never fired"
    assert len(warnings) == 1 and "worker 1 of job" in warnings[0] and "restarting" in warnings[0]
    windows = duckdb.sql(f"SELECT * FROM read_csv('{tmp_path / 'out'}/*.csv') ORDER BY ALL").fetchall()
    assert windows and windows == duckdb.sql(ORACLE.format(files=f"{tmp_path / 'events'}/*.csv")).fetchall()

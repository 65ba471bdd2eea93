"""A job calling Python UDFs at parallelism 2: its worker processes import the functions by module
name, and after worker 1 is killed (SIGKILL, after its third source batch) the restarted
workers import them again and the job ends with exactly the output of the same job written with
built-in functions (a DuckDB oracle over the input files)."""
from __future__ import annotations

import threading
from datetime import datetime
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
    monkeypatch.setenv("WEIR_FAULT", "batch:3@1")  # worker 1 dies after its 3rd source batch
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


def test_a_function_of_main_runs_at_parallelism_1_and_is_refused_by_workers_with_the_fix(tmp_path: Path):
    import weir
    from weir.engine.errors import EngineError
    from weir.planner.catalog import register_function
    from weir.planner.planner import Planner

    def halve(v):
        return None if v is None else v // 2

    halve.__module__, halve.__qualname__ = "__main__", "halve_in_a_notebook"  # as defined in a notebook
    (tmp_path / "events").mkdir()
    (tmp_path / "events" / "part-0.csv").write_text("ts,k,v\n2024-01-01 00:00:01,a,10\n2024-01-01 00:00:02,b,6\n")
    outcomes = {}
    for parallelism in ("1", "2"):
        sql = JOB.format(data=tmp_path / "events", out=tmp_path / f"out{parallelism}").replace("twice(v)", "halve(v)")
        planner = Planner(db_path=str(tmp_path / "v.duckdb"),
                          settings={"parallelism.default": parallelism, "weir.source.batch-size": "2"})
        register_function(planner.catalog, weir.udf(halve, result_type="BIGINT"))
        for statement in parse(sql.replace("CREATE FUNCTION twice AS 'udf_functions.twice' LANGUAGE PYTHON;", "")):
            planner.execute(statement)
        try:
            outcomes[parallelism] = run_job(planner.script().graph, JobOptions(state_dir=tmp_path / f"s{parallelism}"))
        except EngineError as error:
            outcomes[parallelism] = error
    assert not isinstance(outcomes["1"], EngineError), outcomes["1"]
    assert duckdb.sql(f"SELECT * FROM read_csv('{tmp_path / 'out1'}/*.csv') ORDER BY ALL").fetchall() == \
        [("A!", datetime(2024, 1, 1), 1, 5)]  # halve(v) > 4 keeps only v = 10
    refused = outcomes["2"]
    assert isinstance(refused, EngineError)
    assert "halve is defined in __main__" in refused.message and "parallelism 1" in refused.hint

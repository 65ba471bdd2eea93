"""Python aggregate functions' accumulators are checkpointed state: a job at parallelism 2 whose
worker 1 is killed (SIGKILL) ends with exactly the output of DuckDB's batch query, and a savepoint
taken at parallelism 2 restores at parallelism 1 (its key groups redistributed) to the output of a
job run straight through."""
from __future__ import annotations

from pathlib import Path

import duckdb

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse
from jobs import run_with_worker_1_killed

FUNCTIONS = """
CREATE FUNCTION pysum AS 'udaf_functions.PySum' LANGUAGE PYTHON;
CREATE FUNCTION arrowsum AS 'udaf_functions.ArrowSum' LANGUAGE PYTHON;
"""
KILLED_JOB = FUNCTIONS + """
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
CREATE MATERIALIZED VIEW windows AS SELECT k, window_start, pysum(v) AS py, arrowsum(v) AS arrow, COUNT(*) AS n
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
CREATE MATERIALIZED VIEW moved AS SELECT s, pysum(c) AS py, arrowsum(c) AS arrow
FROM (SELECT k, COUNT(*) % 3 AS s, COUNT(*) AS c FROM events GROUP BY k) GROUP BY s;
"""
ORACLES = {
    "windows": "SELECT k, time_bucket(INTERVAL '10 seconds', ts) AS window_start, SUM(v), SUM(v), COUNT(*) "
               "FROM read_csv('{files}', header = true) GROUP BY ALL ORDER BY ALL",
    "moved": "SELECT s, SUM(c), SUM(c) FROM (SELECT k, COUNT(*) % 3 AS s, COUNT(*) AS c "
             "FROM read_csv('{files}', header = true) GROUP BY k) GROUP BY s ORDER BY ALL",
}
GUARD_SECONDS = 240


def views(db: Path, names) -> dict[str, list]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {name: con.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in names}


def test_accumulators_survive_a_killed_worker_at_parallelism_2_with_exact_output(tmp_path: Path, monkeypatch):
    (tmp_path / "events").mkdir()
    for part in range(2):  # two splits: each worker reads one
        rows = "".join(f"2024-01-01 00:00:{2 * i:02d},{'abcd'[i * 7 % 4]},{i * 5 % 11}\n" for i in range(part, 26, 2))
        (tmp_path / "events" / f"part-{part}.csv").write_text("ts,k,v\n" + rows)
    warnings = run_with_worker_1_killed(tmp_path, monkeypatch, KILLED_JOB.format(data=tmp_path / "events"), GUARD_SECONDS)
    assert len(warnings) == 1 and "worker 1 of job" in warnings[0] and "restarting" in warnings[0]
    found = views(tmp_path / "v.duckdb", ORACLES)
    files = f"{tmp_path / 'events'}/*.csv"
    for name, oracle in ORACLES.items():
        assert found[name] and found[name] == duckdb.sql(oracle.format(files=files)).fetchall(), name


BIDS = FUNCTIONS + """
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', 'first-event.rate' = '2000', 'splits' = '2', 'events' = '12000');
CREATE MATERIALIZED VIEW windows AS SELECT auction % 10 AS a, window_start, pysum(price) AS py,
  arrowsum(price) AS arrow, SUM(price) AS builtin
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND)) GROUP BY auction % 10, window_start, window_end;
CREATE MATERIALIZED VIEW moved AS SELECT s, pysum(c) AS py, SUM(c) AS builtin
FROM (SELECT bidder % 40 AS b, COUNT(*) % 4 AS s, COUNT(*) AS c FROM bid GROUP BY bidder % 40) GROUP BY s;
"""


def run_bids(tmp: Path, parallelism: int, *, savepoint: Path | None = None, on_executor=None):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "500",
                "weir.checkpointing.interval-batches": "3"}
    graph = plan_script(parse(BIDS), db_path=str(tmp / "v.duckdb"), settings=settings).graph
    return run_job(graph, JobOptions(state_dir=tmp / "state", from_savepoint=savepoint, on_executor=on_executor))


def test_a_savepoint_at_parallelism_2_restores_at_parallelism_1(tmp_path: Path):
    straight = tmp_path / "straight"
    run_bids(straight, 1)
    expected = views(straight / "v.duckdb", ORACLES)
    assert expected["windows"] and all(py == arrow == builtin for _, _, py, arrow, builtin in expected["windows"])
    assert expected["moved"] and all(py == builtin for _, py, builtin in expected["moved"])

    stopped = tmp_path / "stopped"

    def ask_for_stop(executor) -> None:  # stop with a savepoint at the first boundary
        (stopped / "state" / "control").mkdir(parents=True, exist_ok=True)
        (stopped / "state" / "control" / "stop-test.request").write_text('{"kind": "stop", "path": null}')

    first = run_bids(stopped, 2, on_executor=ask_for_stop)
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    assert views(stopped / "v.duckdb", ORACLES) != expected  # stopped before the end
    run_bids(stopped, 1, savepoint=first.stopped_with.path)
    assert views(stopped / "v.duckdb", ORACLES) == expected

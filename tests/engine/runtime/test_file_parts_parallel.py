"""One big file read in parallel: its parts (a parquet file's row groups, a csv file's byte
ranges) are divided among the subtasks, each read once across a killed worker's restart; and
the two-phase window aggregate gives the same output, late rows included, at parallelism 1 and
2 and across a savepoint taken at 2 and restored at 1, over files read by both subtasks.

(Not over the parts of one file: the watermark restarts at each part, so at parallelism 1 a
part read after another meets the operator's higher watermark, and rows out of order across a
part's start can be late at 1 and not at 2. Hence 'source.split-size' is opt-in.)"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings, strategies as st

from weir.engine.connectors.filesystem import FileSystemSource
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

from jobs import run_with_worker_1_killed, stop_after_first_checkpoint

JOB = """
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = '{fmt}', 'source.split-size' = '{split}');
CREATE MATERIALIZED VIEW windows AS SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
"""
ORACLE = ("SELECT k, time_bucket(INTERVAL '10 seconds', ts) AS window_start, COUNT(*), SUM(v), MAX(v) "
          "FROM {scan} GROUP BY ALL ORDER BY ALL")


def events(seconds: list[int]) -> pa.Table:
    return pa.table({"ts": pa.array([s * 1000 for s in seconds], pa.timestamp("ms")),
                     "k": ["abcde"[(i * 7) % 5] for i in range(len(seconds))],
                     "v": [(i * 13) % 101 for i in range(len(seconds))]})


def windows(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql("SELECT * FROM windows ORDER BY ALL").fetchall()


def test_a_parquet_files_row_groups_are_shared_and_each_read_once_across_a_killed_worker(tmp_path, monkeypatch):
    path = tmp_path / "bids.parquet"
    pq.write_table(events(list(range(240))), path, row_group_size=20)  # 12 row groups
    source = FileSystemSource({"connector": "filesystem", "path": str(path), "format": "parquet"}, pa.schema([]))
    owners = [source.owner(split, 2) for split in source.splits()]
    assert len(owners) == 12 and sorted(owners) == [0] * 6 + [1] * 6
    # Worker 1 is killed after its 3rd batch (so it read row groups of its own), and restarted.
    run_with_worker_1_killed(tmp_path, monkeypatch, JOB.format(data=path, fmt="parquet", split="32MB"))
    found = windows(tmp_path / "v.duckdb")
    assert found and found == duckdb.sql(ORACLE.format(scan=f"read_parquet('{path}')")).fetchall()


def test_a_csv_files_byte_ranges_are_shared_and_each_read_once_across_a_killed_worker(tmp_path, monkeypatch):
    path = tmp_path / "events.csv"
    pacsv.write_csv(events(list(range(240))), path)
    job = JOB.format(data=path, fmt="csv", split="600")
    source = FileSystemSource({"connector": "filesystem", "path": str(path), "format": "csv",
                               "source.split-size": "600"}, pa.schema([]))
    assert {source.owner(split, 2) for split in source.splits()} == {0, 1}
    run_with_worker_1_killed(tmp_path, monkeypatch, job)
    found = windows(tmp_path / "v.duckdb")
    assert found and found == duckdb.sql(ORACLE.format(scan=f"read_csv('{path}', header = true)")).fetchall()


#: The job of JOB into csv part files under '{out}' (a file sink's output survives a rescale as it is).
FILE_JOB = JOB.replace("CREATE MATERIALIZED VIEW windows AS", """CREATE TABLE windows (k VARCHAR,
  window_start TIMESTAMP(3), n BIGINT, total BIGINT, top BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO windows""")


def run(directory: Path, data: Path, parallelism: int, *, stop: bool = False, savepoint: Path | None = None):
    config = {"parallelism.default": str(parallelism), "weir.source.batch-size": "4",
              "table.optimizer.agg-phase-strategy": "TWO_PHASE"}
    if stop:
        config["weir.checkpointing.interval-batches"] = "2"
    sql = FILE_JOB.format(data=data, fmt="csv", split="32MB", out=directory / "out")
    graph = plan_script(parse(sql), db_path=str(directory / "v.duckdb"), settings=config).graph
    result = run_job(graph, JobOptions(state_dir=directory / "state", from_savepoint=savepoint,
                                       on_checkpoint=stop_after_first_checkpoint(directory / "state") if stop else None))
    if not list((directory / "out").glob("*.csv")):  # a savepoint before any window fired
        return result, []
    rows = duckdb.sql(f"SELECT * FROM read_csv('{directory / 'out'}/*.csv', header = true) ORDER BY ALL")
    return result, rows.fetchall()


def late(result) -> int:
    return sum(result.late_rows_by_source().values())


#: Seconds out of order by up to 6 s under a 1 s watermark delay: some rows are late.
shuffled_seconds = st.lists(st.integers(0, 6), min_size=40, max_size=120).map(
    lambda back: [max(0, i // 2 - b) for i, b in enumerate(back)])


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seconds=shuffled_seconds)
def test_two_phase_output_and_late_rows_are_the_same_at_parallelism_1_2_and_after_a_rescale(tmp_path_factory, seconds):
    base = tmp_path_factory.mktemp("two-phase")
    (base / "in").mkdir()
    # Then rows in order, later, so that the stop's savepoint comes while both files are read.
    tail = list(range(max(seconds) + 20, max(seconds) + 20 + 600))
    half = len(seconds) // 2  # two files, a chain each: both subtasks read at parallelism 2
    pacsv.write_csv(events(seconds[:half] + tail[0::2]), base / "in" / "part-0.csv")
    pacsv.write_csv(events(seconds[half:] + tail[1::2]), base / "in" / "part-1.csv")
    one, expected = run(base / "p1", base / "in", 1)
    two, found = run(base / "p2", base / "in", 2)
    assert expected and found == expected
    assert two.counter("pre_aggregated_rows") > 0  # the two-phase plan ran
    assert late(two) == late(one)
    stopped, _ = run(base / "rescaled", base / "in", 2, stop=True)
    assert stopped.stopped_with is not None
    _, rescaled = run(base / "rescaled", base / "in", 1, savepoint=stopped.stopped_with.path)
    assert rescaled == expected  # (late-row counters are metrics: rows replayed after the savepoint count twice)

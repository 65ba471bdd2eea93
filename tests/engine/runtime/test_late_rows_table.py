"""'source.late-rows.table': the rows that window operators drop as late land in a table of the
job's database, once per operator, with their source columns, at parallelism 1 and 2 alike;
and the summary counts late rows per source table.

A window Top-N and a window join read `events`; 50 rows far behind the watermark are mixed
into it, and those and no other rows must be in `late_events`, once per operator."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

ROWS, LATE, KEYS = 20_000, 50, 20
EVENTS = f"""
SELECT i AS id, 'k' || (i % {KEYS}) AS k, (hash(i) % 1000)::BIGINT AS v,
       TIMESTAMP '2024-01-01' + to_milliseconds(i * 10 - (hash(i, 1) % 1500)::BIGINT) AS ts, i::DOUBLE AS position
FROM range({ROWS}) AS r(i)
UNION ALL
SELECT {ROWS} + j, 'k' || (j % {KEYS}), 5000 + j, TIMESTAMP '2024-01-01' + to_milliseconds(j * 90), 10000.5 + j
FROM range({LATE}) AS r(j)
"""
MARKS = f"""
SELECT 'k' || (i % {KEYS}) AS k, TIMESTAMP '2024-01-01' + to_milliseconds((i // {KEYS}) * 10000 + 5000) AS ts
FROM range({KEYS} * 21) AS r(i)
"""
JOB = """
CREATE TABLE events (id BIGINT, k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{dir}/events.parquet', 'format' = 'parquet',
      'source.late-rows.table' = 'late_events');
CREATE TABLE marks (k VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{dir}/marks.parquet', 'format' = 'parquet');
CREATE MATERIALIZED VIEW top_events AS
SELECT id, k, v, window_start, window_end FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY v DESC, id) AS rownum
  FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
) WHERE rownum = 1;
CREATE MATERIALIZED VIEW marked_events AS
SELECT E.id, E.k, E.window_start
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) E
JOIN TABLE(TUMBLE(TABLE marks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) M
ON E.k = M.k AND E.window_start = M.window_start AND E.window_end = M.window_end;
"""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("late_rows_table")
    # Row groups of 4,096 rows: five splits, which the two workers of a parallel run share.
    duckdb.sql(f"COPY ({EVENTS} ORDER BY position) TO '{directory}/events.parquet' "
               "(FORMAT parquet, ROW_GROUP_SIZE 4096)")
    duckdb.sql(f"COPY ({MARKS} ORDER BY ts) TO '{directory}/marks.parquet' (FORMAT parquet)")
    return directory


def run(inputs: Path, tmp: Path, parallelism: int):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "1000",
                "weir.checkpointing.interval-batches": "4"}
    script = plan_script(parse(JOB.format(dir=inputs)), db_path=str(tmp / "job.duckdb"), settings=settings)
    assert script.late_rows_tables == ["late_events"]
    result = run_job(script.graph, JobOptions(state_dir=tmp / "state"))
    con = duckdb.connect(str(tmp / "job.duckdb"), read_only=True)
    try:
        return con.sql("SELECT * FROM late_events ORDER BY ALL").fetchall(), result
    finally:
        con.close()


@pytest.mark.parametrize("parallelism", [1, 2])
def test_late_rows_of_a_topn_and_a_join_land_in_the_table(inputs, tmp_path, parallelism):
    kept, result = run(inputs, tmp_path, parallelism)
    expected = duckdb.sql(f"""
        SELECT id, k, v, ts, op FROM read_parquet('{inputs}/events.parquet'),
               (VALUES ('top_events.window_rank'), ('marked_events.window_join')) AS ops(op)
        WHERE id >= {ROWS} ORDER BY ALL""").fetchall()
    assert [row[:5] for row in kept] == expected
    assert all(row[5] > row[3] for row in kept)  # the watermark each row was behind
    assert result.late_rows_by_source() == {"events": 2 * LATE}  # marks arrive in order
    assert result.counter("late_rows_dropped") == 2 * LATE


def test_parallelism_does_not_change_the_late_rows(inputs, tmp_path):
    """Deterministic by construction: a row is judged by its arrival watermark (the running
    maximum over the rows before it in its split), which no interleaving of workers changes —
    so the rows and the watermark each was behind are the same at parallelism 1 and 2."""
    one, _ = run(inputs, tmp_path / "p1", 1)
    two, _ = run(inputs, tmp_path / "p2", 2)
    assert one == two
    assert len(one) == 2 * LATE and all(row[5] > row[3] for row in two)

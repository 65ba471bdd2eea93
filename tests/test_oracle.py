"""weir jobs over 120,000 generated rows against DuckDB's batch query over the same files.

The rows arrive out of order, but never by more than the watermark delay, so
no row is late and the streaming result must equal the batch query exactly:
every aggregate, every window spelling, a directory of files read as one
source, and the csv and parquet sinks. Then rows far behind the watermark are
mixed in; the result must exclude exactly them, and the job must count them.

Every job is run once per module (a fixture) and each result is a test. The tests of one
job are one ``xdist_group`` (``job_params``): under ``pytest -n`` they share a worker, which
runs the job once, instead of each worker that gets one of them running it again.
"""
from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from weir.shell.cli import main

ROWS = 120_000
KEYS = 50
STEP_MS = 10  # row i is due at i * STEP_MS ...
DELAY_MS = 2_000  # ... and arrives up to DELAY_MS - 1 early: the watermark delay
LATE_ROWS = 100
#: Late rows come after this many rows, more than a default batch (65,536): with any batch
#: size up to that, at least one whole batch of later times precedes each late row.
LATE_FROM = 70_000
BATCH_SIZE = 4_096
#: A prime: its batches end anywhere in a window, a row group and a BATCH_SIZE batch. Some
#: 20 s of event time, so that half of the 10 s windows span two batches (each batch costs
#: every one of the job's 17 operators a round, so more batches prove little more).
ODD_BATCH_SIZE = 1_999
SEED = 7

#: Row i of the stream: a key, a nullable value, a small-domain value for DISTINCT, and its
#: time; ``position`` orders the file (and is not a column of the table).
EVENTS_SQL = f"""
SELECT i AS id,
       'k' || (hash(i, {SEED}, 1) % {KEYS}) AS k,
       CASE WHEN hash(i, {SEED}, 2) % 20 = 0 THEN NULL ELSE (hash(i, {SEED}, 3) % 1000)::BIGINT END AS v,
       (hash(i, {SEED}, 4) % 10)::BIGINT AS w,
       TIMESTAMP '2024-01-01' + to_milliseconds(i * {STEP_MS} - (hash(i, {SEED}, 5) % {DELAY_MS})::BIGINT) AS ts,
       i::DOUBLE AS position
FROM range({ROWS}) AS r(i)
"""

#: Rows far behind: their times are in the first 10 seconds, their values huge, so
#: that counting any of them would show; each follows row LATE_FROM + 500 j.
LATE_SQL = f"""
SELECT {ROWS} + j AS id, 'k' || (j % {KEYS}) AS k, 1000000 + j AS v, (j % 10)::BIGINT AS w,
       TIMESTAMP '2024-01-01' + to_milliseconds(j * 97) AS ts,
       {LATE_FROM} + 500 * j + 0.5 AS position
FROM range({LATE_ROWS}) AS r(j)
"""

SOURCE_DDL = """
CREATE TABLE events (
  id BIGINT, k VARCHAR, v BIGINT, w BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet'{options});
"""

#: name -> (weir query, DuckDB batch query over the table `events`).
#: Windows in the oracle come from time_bucket (with an origin for offsets); AVG of the BIGINT v is
#: Flink's, a BIGINT truncated toward zero (sum // count).
PIPELINES = {
    "tvf_aggregates": (
        """SELECT k, window_start, window_end, window_time,
                  COUNT(*) AS n, COUNT(v) AS n_v, COUNT(DISTINCT w) AS distinct_w,
                  SUM(v) AS total, MIN(v) AS low, MAX(v) AS high, AVG(v) AS mean,
                  COUNT(*) FILTER (WHERE v > 500) AS n_big, SUM(v) FILTER (WHERE w < 3) AS total_small_w,
                  MAX(ts) AS last_ts
           FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
           GROUP BY k, window_start, window_end, window_time""",
        """SELECT k, time_bucket(INTERVAL '10 s', ts) AS window_start,
                  time_bucket(INTERVAL '10 s', ts) + INTERVAL '10 s' AS window_end,
                  time_bucket(INTERVAL '10 s', ts) + INTERVAL '10 s' - INTERVAL '1 ms' AS window_time,
                  count(*) AS n, count(v) AS n_v, count(DISTINCT w) AS distinct_w,
                  sum(v)::BIGINT AS total, min(v) AS low, max(v) AS high, sum(v) // count(v) AS mean,
                  count(*) FILTER (WHERE v > 500) AS n_big, sum(v) FILTER (WHERE w < 3)::BIGINT AS total_small_w,
                  max(ts) AS last_ts
           FROM events GROUP BY ALL""",
    ),
    "named_arguments_offset": (
        """SELECT window_start, window_end, w, COUNT(*) AS n, SUM(v) AS total, COUNT(DISTINCT k) AS keys
           FROM TABLE(TUMBLE(DATA => TABLE events, TIMECOL => DESCRIPTOR(ts),
                             SIZE => INTERVAL '1' MINUTE, OFFSET => INTERVAL '20' SECOND))
           GROUP BY window_start, window_end, w""",
        """SELECT time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '2000-01-01 00:00:20') AS window_start,
                  time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '2000-01-01 00:00:20') + INTERVAL '1 minute' AS window_end,
                  w, count(*) AS n, sum(v)::BIGINT AS total, count(DISTINCT k) AS keys
           FROM events GROUP BY ALL""",
    ),
    "risingwave_where_having": (
        """SELECT window_start, window_end, v % 7 AS bucket, COUNT(*) AS n, MAX(v) - MIN(v) AS spread
           FROM TUMBLE(events, ts, INTERVAL '30' SECOND)
           WHERE v IS NOT NULL AND k <> 'k0'
           GROUP BY window_start, window_end, v % 7
           HAVING COUNT(*) > 40""",
        """SELECT time_bucket(INTERVAL '30 s', ts) AS window_start,
                  time_bucket(INTERVAL '30 s', ts) + INTERVAL '30 s' AS window_end,
                  v % 7 AS bucket, count(*) AS n, max(v) - min(v) AS spread
           FROM events WHERE v IS NOT NULL AND k <> 'k0'
           GROUP BY ALL HAVING count(*) > 40""",
    ),
    "legacy_group_window": (
        """SELECT k, TUMBLE_START(ts, INTERVAL '5' SECOND) AS window_start,
                  TUMBLE_END(ts, INTERVAL '5' SECOND) AS window_end,
                  TUMBLE_ROWTIME(ts, INTERVAL '5' SECOND) AS rowtime,
                  COUNT(*) AS n, MIN(ts) AS first_ts, SUM(w) AS total_w
           FROM events
           GROUP BY TUMBLE(ts, INTERVAL '5' SECOND), k""",
        """SELECT k, time_bucket(INTERVAL '5 s', ts) AS window_start,
                  time_bucket(INTERVAL '5 s', ts) + INTERVAL '5 s' AS window_end,
                  time_bucket(INTERVAL '5 s', ts) + INTERVAL '5 s' - INTERVAL '1 ms' AS rowtime,
                  count(*) AS n, min(ts) AS first_ts, sum(w)::BIGINT AS total_w
           FROM events GROUP BY ALL""",
    ),
    # GROUP BY without a window: an updating result kept by upsert in the view.
    "group_by_updating": (
        """SELECT k, w, COUNT(*) AS n, SUM(v) AS total, MIN(v) AS low, MAX(v) AS high, AVG(v) AS mean,
                  COUNT(DISTINCT v % 13) AS buckets, COUNT(*) FILTER (WHERE v > 500) AS n_big, MAX(ts) AS last_ts
           FROM events GROUP BY k, w HAVING COUNT(*) > 10""",
        """SELECT k, w, count(*) AS n, sum(v)::BIGINT AS total, min(v) AS low, max(v) AS high, sum(v) // count(v) AS mean,
                  count(DISTINCT v % 13) AS buckets, count(*) FILTER (WHERE v > 500) AS n_big, max(ts) AS last_ts
           FROM events GROUP BY ALL HAVING count(*) > 10""",
    ),
    # A GROUP BY over a GROUP BY: how many (k, w) have n rows with v over 100 (retracting n as it grows).
    "group_by_over_group_by": (
        """SELECT n, COUNT(*) AS keys FROM (SELECT k, w, COUNT(*) AS n FROM events WHERE v > 100 GROUP BY k, w)
           GROUP BY n""",
        """SELECT n, count(*) AS keys FROM (SELECT k, w, count(*) AS n FROM events WHERE v > 100 GROUP BY k, w)
           GROUP BY n""",
    ),
    "over_rows": (
        """SELECT id, k, ts, SUM(v) OVER w AS total, COUNT(v) OVER w AS n_v, MAX(v) OVER w AS high,
                  MIN(w) OVER w AS low_w
           FROM events
           WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)""",
        """SELECT id, k, ts, sum(v) OVER w::BIGINT AS total, count(v) OVER w AS n_v, max(v) OVER w AS high,
                  min(w) OVER w AS low_w
           FROM events
           WINDOW w AS (PARTITION BY k ORDER BY ts, id ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)""",
    ),
    "over_range_and_unbounded": (
        """SELECT id, COUNT(*) OVER (PARTITION BY w ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING
                                     AND CURRENT ROW) AS last_10s,
                  SUM(v) FILTER (WHERE v > 500) OVER (PARTITION BY w ORDER BY ts RANGE BETWEEN INTERVAL '10'
                                     SECOND PRECEDING AND CURRENT ROW) AS big_10s
           FROM events WHERE k <> 'k1'""",
        """SELECT id, count(*) OVER w AS last_10s, sum(v) FILTER (WHERE v > 500) OVER w::BIGINT AS big_10s
           FROM events WHERE k <> 'k1'
           WINDOW w AS (PARTITION BY w ORDER BY ts RANGE BETWEEN INTERVAL '10 seconds' PRECEDING AND CURRENT ROW)""",
    ),
    "over_so_far": (
        """SELECT id, COUNT(*) OVER (ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS rank_in_time,
                  MAX(v) OVER (ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS high
           FROM events""",
        """SELECT id, count(*) OVER w AS rank_in_time, max(v) OVER w AS high
           FROM events WINDOW w AS (ORDER BY ts, id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)""",
    ),
    "interval_self_join": (
        """SELECT a.id AS a_id, b.id AS b_id, b.ts AS b_ts
           FROM events a LEFT JOIN events b
           ON a.k = b.k AND b.w = 1 AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '500' MILLISECOND
           WHERE a.w = 0""",
        """SELECT a.id AS a_id, b.id AS b_id, b.ts AS b_ts
           FROM events a LEFT JOIN (SELECT * FROM events WHERE w = 1) b
           ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '1 second' AND a.ts + INTERVAL '500 milliseconds'
           WHERE a.w = 0""",
    ),
    "union_windowed": (
        """SELECT window_start, k, COUNT(*) AS n, SUM(v) AS total
           FROM TABLE(TUMBLE(TABLE (SELECT k, v, ts FROM events WHERE w < 5
                                    UNION ALL SELECT k, v * 2, ts FROM events WHERE w >= 3),
                             DESCRIPTOR(ts), INTERVAL '10' SECOND))
           GROUP BY window_start, window_end, k""",
        """SELECT time_bucket(INTERVAL '10 s', ts) AS window_start, k, count(*) AS n, sum(v)::BIGINT AS total
           FROM (SELECT k, v, ts FROM events WHERE w < 5 UNION ALL SELECT k, v * 2, ts FROM events WHERE w >= 3)
           GROUP BY ALL""",
    ),
    # GROUPING SETS, ROLLUP and CUBE over each sliced window kind; DuckDB's own GROUPING SETS is the oracle.
    "tumble_grouping_sets": (
        """SELECT window_start, window_end, k, w, GROUPING(k) AS g_k, GROUPING_ID(k, w) AS gid,
                  COUNT(*) AS n, SUM(v) AS total, MAX(v) AS high, COUNT(DISTINCT w) AS distinct_w
           FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
           GROUP BY window_start, window_end, GROUPING SETS ((k, w), (k), ())""",
        """SELECT time_bucket(INTERVAL '10 s', ts) AS window_start,
                  time_bucket(INTERVAL '10 s', ts) + INTERVAL '10 s' AS window_end,
                  k, w, grouping(k) AS g_k, grouping(k, w) AS gid,
                  count(*) AS n, sum(v)::BIGINT AS total, max(v) AS high, count(DISTINCT w) AS distinct_w
           FROM events GROUP BY GROUPING SETS ((1, 2, k, w), (1, 2, k), (1, 2))""",
    ),
    "hop_rollup": (
        """SELECT window_start, window_end, w, v % 3 AS r, COUNT(*) AS n, AVG(v) AS mean, MIN(ts) AS first_ts
           FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))
           WHERE k <> 'k1'
           GROUP BY window_start, window_end, ROLLUP (w, v % 3)""",
        """SELECT window_start, window_start + INTERVAL '30 s' AS window_end, w, v % 3 AS r,
                  count(*) AS n, sum(v) // count(v) AS mean, min(ts) AS first_ts
           FROM (SELECT *, time_bucket(INTERVAL '10 s', ts) - INTERVAL '10 s' * j AS window_start
                 FROM events, range(3) AS hops(j) WHERE k <> 'k1')
           GROUP BY window_start, ROLLUP (w, v % 3)""",
    ),
    "cumulate_cube_having": (
        """SELECT window_start, window_end, k, w, GROUPING_ID(w, k) AS gid, COUNT(*) AS n, SUM(v) AS total
           FROM TABLE(CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))
           GROUP BY window_start, window_end, CUBE (k, w)
           HAVING COUNT(*) > 5""",
        """SELECT window_start, window_end, k, w, grouping(w, k) AS gid, count(*) AS n, sum(v)::BIGINT AS total
           FROM (SELECT *, time_bucket(INTERVAL '30 s', ts) AS window_start,
                        time_bucket(INTERVAL '30 s', ts) + INTERVAL '10 s' * (j + 1) AS window_end
                 FROM events, range(3) AS steps(j))
           WHERE window_end > ts
           GROUP BY window_start, window_end, CUBE (k, w) HAVING count(*) > 5""",
    ),
}

#: Filesystem sinks at scale: the same per-key minute, through csv and parquet files.
SINK_COLUMNS = "k VARCHAR, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT, total BIGINT, mean DOUBLE"
SINK_QUERY = """SELECT k, window_start, window_end, COUNT(*), SUM(v), AVG(v)
                FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
                GROUP BY k, window_start, window_end"""
SINK_ORACLE = """SELECT k, time_bucket(INTERVAL '1 minute', ts) AS window_start,
                        time_bucket(INTERVAL '1 minute', ts) + INTERVAL '1 minute' AS window_end,
                        count(*) AS n, sum(v)::BIGINT AS total, sum(v) // count(v) AS mean
                 FROM events GROUP BY ALL"""
SINK_FORMATS = ("csv", "parquet")


# -- generating the input and running jobs -------------------------------------------------


def write_events(path: Path, sql: str) -> None:
    duckdb.sql(f"COPY ({sql} ORDER BY position) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 16384)")


@dataclass
class Job:
    directory: Path
    stdout: str
    source: str  # a DuckDB expression reading the job's input files

    def view(self, name: str) -> duckdb.DuckDBPyRelation:
        con = duckdb.connect(str(self.directory / "weir.duckdb"), read_only=True)
        return con.sql(f'SELECT * FROM "{name}"')

    def sink(self, name: str, fmt: str) -> duckdb.DuckDBPyRelation:
        files = sorted(str(p) for p in (self.directory / "out" / name).glob(f"part-*.{fmt}"))
        assert files, f"the {fmt} sink {name} published nothing"
        reader = {"csv": "read_csv", "parquet": "read_parquet"}[fmt]
        return duckdb.sql(f"SELECT * FROM {reader}($files)", params={"files": files})

    def oracle(self, sql: str, where: str = "TRUE") -> duckdb.DuckDBPyRelation:
        con = duckdb.connect()
        con.execute(f"CREATE VIEW events AS SELECT * EXCLUDE (position) FROM {self.source} WHERE {where}")
        return con.sql(sql)

    def late_rows_dropped(self) -> int:
        (count,) = re.findall(r"late rows dropped: ([\d,]+);", self.stdout)
        return int(count.replace(",", ""))

    def late_by_operator(self) -> dict[str, int]:
        found = re.findall(r"^\s+(\S+\.window_aggregate)\s+[\d,]+\s+[\d,]+\s+([\d,]+|-)$", self.stdout, re.M)
        return {name: 0 if late == "-" else int(late.replace(",", "")) for name, late in found}


def run_job(directory: Path, source_path: str, statements: list[str], batch_size: int, options: str = "") -> str:
    """Run the job with ``weir run``; its standard output (the summary)."""
    job = directory / "job.sql"
    job.write_text(SOURCE_DDL.format(path=source_path, options=options) + ";\n".join(statements) + ";\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        # Each job its own state directory: every job here is called `job`, and a finished
        # job of that name with other SQL is refused (it would not be this job's output).
        code = main(["run", str(job), "--db", str(directory / "weir.duckdb"), "--no-progress",
                     "--state-dir", str(directory / "state"), "--set", f"weir.source.batch-size={batch_size}"])
    assert code == 0, err.getvalue()
    return out.getvalue()


def view_statements() -> list[str]:
    return [f"CREATE MATERIALIZED VIEW {name} AS {query}" for name, (query, _) in PIPELINES.items()]


def sink_statements(directory: Path) -> list[str]:
    statements = []
    for fmt in SINK_FORMATS:
        path = directory / "out" / f"minutes_{fmt}"
        statements.append(f"CREATE TABLE minutes_{fmt} ({SINK_COLUMNS}) "
                          f"WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = '{fmt}')")
        statements.append(f"INSERT INTO minutes_{fmt} {SINK_QUERY}")
    return statements


def job_params(job: str, batch_sizes: list[int]) -> list:
    """A module fixture's batch sizes, each with the xdist group of the tests that use it."""
    return [pytest.param(size, id=f"batch{size}", marks=pytest.mark.xdist_group(f"oracle-{job}-{size}"))
            for size in batch_sizes]


@pytest.fixture(scope="module", params=job_params("single_file", [ODD_BATCH_SIZE, BATCH_SIZE]))
def single_file_job(request, tmp_path_factory) -> Job:
    """All window spellings and both file sinks over one parquet file, in one job;
    batches of any size give the same result."""
    directory = tmp_path_factory.mktemp("single_file")
    write_events(directory / "events.parquet", EVENTS_SQL)
    statements = view_statements() + sink_statements(directory)
    out = run_job(directory, str(directory / "events.parquet"), statements, request.param)
    return Job(directory, out, f"read_parquet('{directory / 'events.parquet'}')")


@pytest.fixture(scope="module")
def directory_job(tmp_path_factory) -> Job:
    """The same rows spread over four files of one directory, one file holding half of them:
    it falls behind in event time, and the source's watermark (the minimum) waits for it."""
    directory = tmp_path_factory.mktemp("directory")
    (directory / "events").mkdir()
    for part, condition in enumerate(["hash(id, 11) % 6 < 3", "hash(id, 11) % 6 = 3",
                                      "hash(id, 11) % 6 = 4", "hash(id, 11) % 6 = 5"]):
        write_events(directory / "events" / f"part-{part}.parquet", f"SELECT * FROM ({EVENTS_SQL}) WHERE {condition}")
    query, _ = PIPELINES["tvf_aggregates"]
    out = run_job(directory, str(directory / "events"), [f"CREATE MATERIALIZED VIEW tvf_aggregates AS {query}"],
                  BATCH_SIZE)
    return Job(directory, out, f"read_parquet('{directory / 'events'}/*.parquet')")


@pytest.fixture(scope="module", params=job_params("late", [BATCH_SIZE, 65_536]))
def late_job(request, tmp_path_factory) -> Job:
    """The stream with LATE_ROWS rows far behind mixed in after row LATE_FROM."""
    directory = tmp_path_factory.mktemp("late")
    write_events(directory / "events.parquet", f"{EVENTS_SQL} UNION ALL {LATE_SQL}")
    statements = [f"CREATE MATERIALIZED VIEW {name} AS {PIPELINES[name][0]}"
                  for name in ("tvf_aggregates", "legacy_group_window", "tumble_grouping_sets")]
    out = run_job(directory, str(directory / "events.parquet"), statements, request.param,
                  options=", 'source.late-rows.table' = 'late_events'")
    return Job(directory, out, f"read_parquet('{directory / 'events.parquet'}')")


# -- comparing ------------------------------------------------------------------------------


def sorted_rows(relation: duckdb.DuckDBPyRelation) -> list[tuple]:
    return sorted(relation.fetchall(), key=lambda row: [(v is None, str(v)) for v in row])


def assert_same_result(actual: duckdb.DuckDBPyRelation, expected: duckdb.DuckDBPyRelation) -> None:
    assert actual.columns == expected.columns
    actual_rows, expected_rows = sorted_rows(actual), sorted_rows(expected)
    assert len(actual_rows) == len(expected_rows)
    mismatched = [(a, e) for a, e in zip(actual_rows, expected_rows) if a != e]
    assert mismatched == [], f"{len(mismatched)} rows differ, the first: {mismatched[:3]}"


# -- the input is what the tests claim ---------------------------------------------------------


def test_the_stream_is_out_of_order_within_the_watermark_delay(single_file_job):
    con = duckdb.connect()
    lags = con.sql(f"""
        SELECT count(*) FILTER (WHERE ts < running_max) AS out_of_order,
               max(epoch_ms(running_max) - epoch_ms(ts)) AS worst_lag_ms, count(*) AS n
        FROM (SELECT ts, max(ts) OVER (ORDER BY file_row_number ROWS UNBOUNDED PRECEDING) AS running_max
              FROM read_parquet('{single_file_job.directory / "events.parquet"}', file_row_number = true))
    """).fetchall()[0]
    out_of_order, worst_lag, n = lags
    assert n == ROWS
    assert out_of_order > ROWS // 4
    assert 0 < worst_lag < DELAY_MS


# -- every aggregate and window spelling --------------------------------------------------------


@pytest.mark.parametrize("name", list(PIPELINES))
def test_window_query_equals_batch_query(single_file_job, name):
    _, oracle = PIPELINES[name]
    expected = single_file_job.oracle(oracle)
    assert len(expected.fetchall()) > 100
    assert_same_result(single_file_job.view(name), expected)


def test_no_row_is_late_within_the_delay(single_file_job):
    assert single_file_job.late_rows_dropped() == 0


@pytest.mark.parametrize("fmt", SINK_FORMATS)
def test_file_sink_holds_the_batch_query_result(single_file_job, fmt):
    assert_same_result(single_file_job.sink(f"minutes_{fmt}", fmt), single_file_job.oracle(SINK_ORACLE))


# -- a directory of files as one source ---------------------------------------------------------


def test_directory_source_equals_batch_query(directory_job):
    assert len(list((directory_job.directory / "events").iterdir())) == 4
    assert_same_result(directory_job.view("tvf_aggregates"), directory_job.oracle(PIPELINES["tvf_aggregates"][1]))
    assert directory_job.late_rows_dropped() == 0


# -- late rows ---------------------------------------------------------------------------------


def test_late_rows_are_excluded_from_every_window(late_job):
    for name in ("tvf_aggregates", "legacy_group_window", "tumble_grouping_sets"):
        expected = late_job.oracle(PIPELINES[name][1], where=f"id < {ROWS}")
        assert_same_result(late_job.view(name), expected)


def test_late_rows_are_counted_exactly(late_job):
    assert late_job.late_by_operator() == {
        "tvf_aggregates.window_aggregate": LATE_ROWS,
        "legacy_group_window.window_aggregate": LATE_ROWS,
        "tumble_grouping_sets.window_aggregate": LATE_ROWS,  # each row once, though expanded per set
    }
    assert late_job.late_rows_dropped() == 3 * LATE_ROWS
    assert f"late rows dropped per source: events {3 * LATE_ROWS}" in late_job.stdout


def test_late_rows_are_kept_once_per_operator(late_job):
    kept = late_job.view("late_events").aggregate("weir_operator, count(*) AS n, min(id) AS low, max(id) AS high")
    assert sorted(kept.fetchall()) == sorted(
        (f"{name}.window_aggregate", LATE_ROWS, ROWS, ROWS + LATE_ROWS - 1)
        for name in ("tvf_aggregates", "legacy_group_window", "tumble_grouping_sets"))
    columns = "id, k, v, w, ts"
    assert sorted_rows(late_job.view("late_events").select(columns).distinct()) == \
        sorted_rows(late_job.oracle(f"SELECT {columns} FROM events", where=f"id >= {ROWS}"))

"""The Nexmark queries of examples/nexmark against DuckDB batch SQL over the same events.

Each ``qN.sql`` runs with weir, in process, over EVENTS generated events (the
tables of ``ddl.sql`` with 'events' and 'first-event.rate' set for the test,
and the query's sink turned into parquet files). The oracle reads the same
events straight from the nexmark source into DuckDB tables and computes the
query as a batch, with windows from ``time_bucket`` and interval arithmetic:
the generator is in order within a split and the watermark waits 4 seconds,
so no row is late and the streaming result must equal the batch result.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from engine.connectors.nexmark import COLUMNS
from engine.connectors.registry import create_source
from shell.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "nexmark"
EVENTS = 100_000
#: Events per event-time second: 100,000 events cover 100 s, so 10-second windows fire ten times.
RATE = 1_000
TEN_S = "INTERVAL '10 seconds'"

#: Two generators, each on its own timeline: the source's watermark is their minimum.
SPLITS = 2

#: Event time starts 40 s before 08:00, so that q14's part of the day changes during the run.
BASE_TIME = "2024-01-01 07:59:20"

#: The same table options for weir (in ddl.sql) and for the oracle (read directly).
TABLE_OPTIONS = {"events": str(EVENTS), "first-event.rate": str(RATE), "splits": str(SPLITS),
                 "base-time": BASE_TIME}

#: qN -> DuckDB batch SQL over the tables person, auction and bid, giving the sink's rows
#: under the sink's column names.
ORACLES = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": "SELECT auction, bidder, (price * 908 / 1000.0)::DECIMAL(23, 3) AS price, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "q10": """
        SELECT auction, bidder, price, date_time, extra,
               CAST(CAST(date_time AS DATE) AS VARCHAR) AS dt,
               lpad(CAST(hour(date_time) AS VARCHAR), 2, '0') || ':'
                 || lpad(CAST(minute(date_time) AS VARCHAR), 2, '0') AS hm
        FROM bid""",
    "q14": """
        SELECT auction, bidder, (price * 908 / 1000.0)::DECIMAL(23, 3) AS price,
               CASE WHEN hour(date_time) BETWEEN 8 AND 18 THEN 'dayTime'
                    WHEN hour(date_time) <= 6 OR hour(date_time) >= 20 THEN 'nightTime'
                    ELSE 'otherTime' END AS bid_time_type,
               date_time, extra,
               length(regexp_replace(extra, '[^c]', '', 'g'))::BIGINT AS c_counts
        FROM bid
        WHERE price * 908 > 1000000000::BIGINT AND price * 908 < 50000000000::BIGINT""",
    "q21": """
        SELECT auction, bidder, price, channel,
               CASE lower(channel) WHEN 'apple' THEN '0' WHEN 'google' THEN '1'
                                   WHEN 'facebook' THEN '2' WHEN 'baidu' THEN '3'
                    ELSE CASE WHEN regexp_matches(url, '(&|^)channel_id=')
                              THEN regexp_extract(url, '(&|^)channel_id=([^&]*)', 2) END END AS channel_id
        FROM bid
        WHERE lower(channel) IN ('apple', 'google', 'facebook', 'baidu')
           OR regexp_matches(url, '(&|^)channel_id=')""",
    # Bids with their auction: the suite's regular join (weir's q20 is an interval join, whose
    # bounds hold every bid's auction at the generator's rates).
    "q20": """
        SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time AS bid_date_time, B.extra AS bid_extra,
               A.item_name, A.description, A.initial_bid, A.reserve, A.date_time AS auction_date_time, A.expires,
               A.seller, A.category, A.extra AS auction_extra
        FROM bid AS B JOIN auction AS A ON B.auction = A.id
        WHERE A.category = 10""",
    "q22": """
        SELECT auction, bidder, price, channel,
               regexp_extract(url, '^https://[^/]+/([^/]+)/', 1) AS dir1,
               regexp_extract(url, '^https://[^/]+/[^/]+/([^/]+)/', 1) AS dir2,
               regexp_extract(url, '^https://[^/]+/[^/]+/[^/]+/([^/]+)/', 1) AS dir3
        FROM bid""",
    # Hot items: every 10-second window sliding by 2 seconds holds a bid in 5 windows;
    # per window, the auctions with the most bids (all of them on a tie).
    "q5": """
        WITH windowed AS (
            SELECT auction, time_bucket(INTERVAL '2 seconds', date_time) - INTERVAL '2 seconds' * k AS window_start
            FROM bid, range(5) AS slides(k)),
        counts AS (SELECT auction, window_start, count(*) AS num FROM windowed GROUP BY ALL)
        SELECT auction, num, window_start AS starttime, window_start + INTERVAL '10 seconds' AS endtime
        FROM counts
        WHERE num = (SELECT max(num) FROM counts AS c WHERE c.window_start = counts.window_start)""",
    # Highest bid: per 10-second window, the bids at the window's highest price.
    "q7": f"""
        WITH windowed AS (SELECT *, time_bucket({TEN_S}, date_time) AS window_start FROM bid)
        SELECT auction, bidder, price, date_time, extra FROM windowed
        WHERE price = (SELECT max(price) FROM windowed AS w WHERE w.window_start = windowed.window_start)""",
    # New users: persons who joined and created an auction in the same 10-second window.
    "q8": f"""
        SELECT DISTINCT p.id, p.name, time_bucket({TEN_S}, p.date_time) AS stime
        FROM person AS p JOIN auction AS a
          ON a.seller = p.id AND time_bucket({TEN_S}, a.date_time) = time_bucket({TEN_S}, p.date_time)""",
    # User sessions: a bidder's bids at most 10 seconds apart are one session (as in Flink,
    # windows that touch merge), which ends 10 seconds after its last bid.
    "q11": """
        WITH gaps AS (
            SELECT bidder, date_time,
                   CASE WHEN date_time - lag(date_time) OVER (PARTITION BY bidder ORDER BY date_time)
                             <= INTERVAL '10 seconds' THEN 0 ELSE 1 END AS starts_session
            FROM bid),
        sessions AS (
            SELECT bidder, date_time,
                   sum(starts_session) OVER (PARTITION BY bidder ORDER BY date_time
                                             ROWS UNBOUNDED PRECEDING) AS session
            FROM gaps)
        SELECT bidder, count(*) AS bid_count, min(date_time) AS starttime,
               max(date_time) + INTERVAL '10 seconds' AS endtime
        FROM sessions GROUP BY bidder, session""",
}

#: The queries that have an example file and are checked here.
QUERIES = sorted(ORACLES, key=lambda q: int(q[1:]))

#: Each query's result is a real test of the query: at least this many rows.
MIN_ROWS = {"q2": 100, "q5": 40, "q7": 10, "q8": 100, "q11": 1000}


# -- the job ------------------------------------------------------------------------------------


def ddl_for_the_test() -> str:
    """ddl.sql with the test's table options instead of the example's."""
    text = (EXAMPLES / "ddl.sql").read_text()
    for key, value in TABLE_OPTIONS.items():
        text, count = re.subn(rf"'{re.escape(key)}' = '[^']*'", f"'{key}' = '{value}'", text)
        if count == 0:  # an option the example leaves out: add it to every table
            text, count = re.subn(r"'connector' = 'nexmark',", f"'connector' = 'nexmark', '{key}' = '{value}',", text)
        assert count == 3, f"ddl.sql should set '{key}' on its three tables"
    return text


def with_parquet_sink(query_sql: str, out: Path) -> str:
    """The query file with its sink table writing parquet files into ``out``."""
    text, count = re.subn(r"(CREATE TABLE nexmark_q\d+ \(.*?\)\s*)WITH \([^;]*\);",
                          lambda m: f"{m.group(1)}WITH ('connector' = 'filesystem', 'path' = '{out}', "
                                    "'format' = 'parquet');",
                          query_sql, flags=re.S)
    assert count == 1, "a query file declares one sink table, nexmark_qN"
    return text


def run_query(name: str, directory: Path) -> str:
    """Run ``qN.sql`` with weir; a DuckDB expression reading the rows its sink published."""
    out = directory / "out"
    job = directory / f"{name}.sql"
    job.write_text(ddl_for_the_test() + "\n" + with_parquet_sink((EXAMPLES / f"{name}.sql").read_text(), out))
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["run", str(job), "--db", str(directory / "weir.duckdb"), "--no-progress"])
    assert code == 0, stderr.getvalue()
    assert "late rows dropped: 0;" in stdout.getvalue()
    files = sorted(str(p) for p in out.glob("part-*.parquet"))
    assert files, f"{name} published no part files"
    return f"read_parquet([{', '.join(repr(f) for f in files)}])"


# -- the oracle ---------------------------------------------------------------------------------


def read_table(kind: str) -> pa.Table:
    """Every row of one nexmark table, read from the source as weir reads it."""
    options = {"connector": "nexmark", "table": kind, **TABLE_OPTIONS}
    source = create_source(options, pa.schema(COLUMNS[kind]))
    batches = [batch for split in source.splits() for batch, _ in source.read(split)]
    return pa.Table.from_batches(batches, source.schema)


@pytest.fixture(scope="module")
def oracle() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for kind in COLUMNS:
        con.register("generated", read_table(kind))
        con.execute(f"CREATE TABLE {kind} AS SELECT * FROM generated")
        con.unregister("generated")
    return con


# -- comparing ----------------------------------------------------------------------------------


def assert_same_result(con: duckdb.DuckDBPyConnection, actual_sql: str, expected_sql: str) -> None:
    """The same columns, and the same rows as a multiset (EXCEPT ALL both ways is empty)."""
    assert con.sql(actual_sql).columns == con.sql(expected_sql).columns
    for one, other, what in ((expected_sql, actual_sql, "missing"), (actual_sql, expected_sql, "unexpected")):
        [(count,)] = con.sql(f"SELECT count(*) FROM (({one}) EXCEPT ALL ({other}))").fetchall()
        first = con.sql(f"({one}) EXCEPT ALL ({other}) LIMIT 3").fetchall()
        assert count == 0, f"{count} rows {what}, the first: {first}"


# -- the tests ----------------------------------------------------------------------------------


def test_the_three_tables_are_one_stream_of_events(oracle):
    """1 person, 3 auctions and 46 bids in every 50 events, all in one span of event time."""
    counts = dict(oracle.sql("""
        SELECT 'person', count(*) FROM person UNION ALL SELECT 'auction', count(*) FROM auction
        UNION ALL SELECT 'bid', count(*) FROM bid""").fetchall())
    assert counts == {"person": EVENTS // 50, "auction": EVENTS * 3 // 50, "bid": EVENTS * 46 // 50}
    [(span,)] = oracle.sql("""
        SELECT max(date_time) - min(date_time) FROM (
            SELECT date_time FROM person UNION ALL SELECT date_time FROM auction
            UNION ALL SELECT date_time FROM bid)""").fetchall()
    assert span.total_seconds() == pytest.approx(EVENTS / RATE, abs=0.01)


def test_q14_sees_two_parts_of_the_day(oracle):
    parts = oracle.sql(f"SELECT DISTINCT bid_time_type FROM ({ORACLES['q14']}) ORDER BY 1").fetchall()
    assert parts == [("dayTime",), ("otherTime",)]


def test_every_query_file_is_checked():
    files = sorted(p.stem for p in EXAMPLES.glob("q*.sql"))
    assert files == sorted(QUERIES)


@pytest.mark.parametrize("name", QUERIES)
def test_query_equals_batch_query(name, oracle, tmp_path):
    [(rows,)] = oracle.sql(f"SELECT count(*) FROM ({ORACLES[name]})").fetchall()
    assert rows >= MIN_ROWS.get(name, 1000)
    assert_same_result(oracle, f"SELECT * FROM {run_query(name, tmp_path)}", ORACLES[name])

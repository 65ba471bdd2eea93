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

from weir.engine.connectors.nexmark import COLUMNS
from weir.engine.connectors.registry import create_source
from weir.engine.runtime.source_reader import SourceReader
from weir.planner.settings import SETTINGS
from weir.shell.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "nexmark"
EVENTS = 100_000
#: Events per event-time second: 100,000 events cover 100 s, so 10-second windows fire ten times.
RATE = 1_000
TEN_S = "INTERVAL '10 seconds'"

#: Two generators, each on its own timeline: the source's watermark is their minimum.
SPLITS = 2

#: Event time starts 40 s before 08:00, so that q14's part of the day changes during the run.
BASE_TIME = "2024-01-01 07:59:20"

#: The job's 'weir.source.batch-size' (the default): the order rows arrive in depends on it.
JOB_BATCH_SIZE = int(SETTINGS["weir.source.batch-size"].default)

#: The same table options for weir (in ddl.sql) and for the oracle (read directly).
TABLE_OPTIONS = {"events": str(EVENTS), "first-event.rate": str(RATE), "splits": str(SPLITS),
                 "base-time": BASE_TIME}

_RANKS = {"": "", "1": "WHERE price < 10000", "2": "WHERE price >= 10000 AND price < 1000000",
          "3": "WHERE price >= 1000000"}
#: q15 and q16's counts: bids, distinct bidders and distinct auctions, in total and per price rank.
RANKED_COUNTS = ", ".join(
    f"count({arg}){f' FILTER ({cond})' if cond else ''} AS {'rank' + r + '_' if r else 'total_'}{what}"
    for what, arg in (("bids", "*"), ("bidders", "DISTINCT bidder"), ("auctions", "DISTINCT auction"))
    for r, cond in _RANKS.items())

#: qN -> DuckDB batch SQL over the tables person, auction and bid, giving the sink's rows
#: under the sink's column names.
ORACLES = {
    "q0": "SELECT auction, bidder, price, date_time, extra FROM bid",
    "q1": "SELECT auction, bidder, (price * 908 / 1000.0)::DECIMAL(23, 3) AS price, date_time, extra FROM bid",
    "q2": "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    # Local item suggestion: sellers in three states with auctions in category 10.
    "q3": """
        SELECT P.name, P.city, P.state, A.id FROM auction AS A JOIN person AS P ON A.seller = P.id
        WHERE A.category = 10 AND P.state IN ('OR', 'ID', 'CA')""",
    # Bids expanded with their auction (category 10).
    "q20": """
        SELECT auction, bidder, price, channel, url, B.date_time AS bid_date_time, B.extra AS bid_extra,
               item_name, description, initial_bid, reserve, A.date_time AS auction_date_time, expires,
               seller, category, A.extra AS auction_extra
        FROM bid AS B JOIN auction AS A ON B.auction = A.id WHERE A.category = 10""",
    # Average winning price per category: the highest bid of each auction made while it was open.
    # AVG of a BIGINT is a BIGINT in Flink: the sum over the count, truncated.
    "q4": """
        SELECT category AS id, sum(final) // count(final) AS final FROM (
            SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
            WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
            GROUP BY A.id, A.category) GROUP BY category""",
    # Winning bids: per auction, the highest bid made while it was open (the earliest on a tie).
    "q9": """
        SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra,
               auction, bidder, price, bid_date_time, bid_extra FROM (
            SELECT A.*, B.auction, B.bidder, B.price, B.date_time AS bid_date_time, B.extra AS bid_extra,
                   row_number() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time, B.bidder, B.extra) AS rn
            FROM auction A, bid B WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires)
        WHERE rn = 1""",
    # The last bid of each bidder on each auction: of bids with the same time, the last to
    # arrive (Flink's keep-last deduplication).
    "q18": """
        SELECT auction, bidder, price, channel, url, date_time, extra FROM (
            SELECT *, row_number() OVER (PARTITION BY bidder, auction
                                         ORDER BY date_time DESC, arrival DESC) AS rn FROM bid)
        WHERE rn = 1""",
    # The ten highest bids of each auction, with their rank: of bids with the same price, the
    # earlier to arrive ranks first (Flink's Top-N).
    "q19": """
        SELECT auction, bidder, price, channel, url, date_time, extra, rank_number FROM (
            SELECT *, row_number() OVER (PARTITION BY auction ORDER BY price DESC, arrival) AS rank_number
            FROM bid)
        WHERE rank_number <= 10""",
    # Bounded side input join: each bid with the side input's value for its auction mod 10,000.
    "q13": f"""
        SELECT B.auction, B.bidder, B.price, B.date_time, S.value
        FROM bid B JOIN read_csv('{EXAMPLES / "side_input.csv"}', header = true,
                                 columns = {{'key': 'BIGINT', 'value': 'VARCHAR'}}) S ON B.auction % 10000 = S.key""",
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
        SELECT auction, num FROM counts
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
    # Per-day statistics (GROUP BY without a window, an updating result): price ranks
    # under 10,000, under 1,000,000 and the rest.
    "q15": f"""
        SELECT strftime(date_time, '%Y-%m-%d') AS day, {RANKED_COUNTS} FROM bid GROUP BY 1""",
    "q16": f"""
        SELECT channel, strftime(date_time, '%Y-%m-%d') AS day, max(strftime(date_time, '%H:%M')) AS minute,
               {RANKED_COUNTS}
        FROM bid GROUP BY 1, 2""",
    "q17": """
        SELECT auction, strftime(date_time, '%Y-%m-%d') AS day, count(*) AS total_bids,
               count(*) FILTER (WHERE price < 10000) AS rank1_bids,
               count(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
               count(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
               min(price) AS min_price, max(price) AS max_price,
               sum(price) // count(price) AS avg_price, -- Flink's AVG(BIGINT): a BIGINT, truncated
               sum(price)::BIGINT AS sum_price
        FROM bid GROUP BY 1, 2""",
}

#: Queries with an updating result, and the key their sink is kept by (upsert) in the test
#: (the suite's sinks declare none: a blackhole takes the changelog as it is).
UPSERT_KEYS = {"q4": ["id"], "q9": ["id"], "q15": ["day"], "q16": ["channel", "day"],
               "q17": ["auction", "day"], "q18": ["bidder", "auction"], "q19": ["auction", "rank_number"]}

#: The queries that have an example file and are checked here.
QUERIES = sorted(ORACLES, key=lambda q: int(q[1:]))

#: Each query's result is a real test of the query: at least this many rows.
MIN_ROWS = {"q2": 100, "q3": 10, "q4": 5, "q5": 40, "q7": 10, "q8": 100, "q11": 1000, "q15": 1, "q16": 100,
            "q20": 100}


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


def with_upsert_sink(query_sql: str, database: Path, key: list[str]) -> str:
    """The query file with its sink a DuckDB table ``result`` with the primary key ``key``:
    the updating result of the query, maintained by upsert."""
    primary_key = f", PRIMARY KEY ({', '.join(key)}) NOT ENFORCED"
    text, count = re.subn(r"(CREATE TABLE nexmark_q\d+ \(.*?)\)\s*WITH \([^;]*\);",
                          lambda m: f"{m.group(1)}{primary_key}) WITH "
                                    f"('connector' = 'duckdb', 'path' = '{database}', 'table-name' = 'result');",
                          query_sql, flags=re.S)
    assert count == 1, "a query file declares one sink table, nexmark_qN"
    return text


def run_query(name: str, directory: Path) -> str:
    """Run ``qN.sql`` with weir; a DuckDB expression reading the rows its sink published
    (of an updating query: the rows its upsert table holds at the end)."""
    out = directory / "out"
    job = directory / f"{name}.sql"
    query = (EXAMPLES / f"{name}.sql").read_text().replace("'path' = 'examples/nexmark/", f"'path' = '{EXAMPLES}/")
    database = directory / "result.duckdb"
    if name in UPSERT_KEYS:
        query = with_upsert_sink(query, database, UPSERT_KEYS[name])
    else:
        query = with_parquet_sink(query, out)
    job.write_text(ddl_for_the_test() + "\n" + query)
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["run", str(job), "--db", str(directory / "weir.duckdb"), "--state-dir", str(directory / "state"),
                     "--no-progress"])
    assert code == 0, stderr.getvalue()
    assert "late rows dropped: 0;" in stdout.getvalue()
    if name in UPSERT_KEYS:
        out.mkdir()
        with duckdb.connect(str(database), read_only=True) as con:
            con.sql("SELECT * FROM result").write_parquet(str(out / "part-0-0.parquet"))
    files = sorted(str(p) for p in out.glob("part-*.parquet"))
    assert files, f"{name} published no part files"
    return f"read_parquet([{', '.join(repr(f) for f in files)}])"


# -- the oracle ---------------------------------------------------------------------------------


def read_table(kind: str) -> pa.Table:
    """Every row of one nexmark table, in the order weir's job reads it (its splits in turn,
    a batch at a time); bids also get their position in that order, ``arrival``, by which
    Flink breaks ties (q18, q19)."""
    options = {"connector": "nexmark", "table": kind, **TABLE_OPTIONS}
    source = create_source(options, pa.schema(COLUMNS[kind]), batch_size=JOB_BATCH_SIZE)
    batches = [batch for batch, _ in SourceReader(source, None) if batch is not None]
    table = pa.Table.from_batches(batches, source.schema)
    if kind == "bid":
        table = table.append_column("arrival", pa.array(range(table.num_rows), pa.int64()))
    return table


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

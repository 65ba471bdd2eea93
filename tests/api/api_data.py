"""Small inputs and queries shared by the tests of the Python API."""
from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa

T0 = dt.datetime(2024, 1, 1)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


#: Bids: (auction, price, seconds after T0), in event-time order.
BID_ROWS = [(1, 10, 0), (1, 20, 1), (2, 30, 2), (2, 40, 11), (1, 50, 12), (2, 60, 21)]


def bids_table(rows=BID_ROWS) -> pa.Table:
    return pa.table({
        "auction": pa.array([r[0] for r in rows], pa.int64()),
        "price": pa.array([r[1] for r in rows], pa.int64()),
        "date_time": pa.array([at(r[2]) for r in rows], pa.timestamp("ms")),
    })


WINDOWS = """CREATE MATERIALIZED VIEW per_auction AS
SELECT auction, window_start, COUNT(*) AS bids, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end"""
#: WINDOWS over the same table, as a DuckDB batch query.
ORACLE = ("SELECT auction, time_bucket(INTERVAL '10 seconds', date_time) AS window_start, COUNT(*) AS bids, "
          "SUM(price) AS total FROM bids GROUP BY ALL ORDER BY window_start, auction")


def oracle(table: pa.Table, sql: str = ORACLE) -> list[tuple]:
    with duckdb.connect() as db:
        db.register("bids", table)
        return db.sql(sql).fetchall()


#: A Nexmark bids table; ``events`` is "'events' = 'N', " for a bounded one, "" for an unbounded one.
NEXMARK = """CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', {events}'first-event.rate' = '1000');
"""

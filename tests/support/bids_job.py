"""The job of the Ray tests and of the savepoint race test (a tumble into csv files, a session window
into an append-only view, an updating GROUP BY into a keyed view) and how to read its output.
``JOB.format(events=..., out=...)``: ``events`` is a connector option to append (``", 'events' = '4000'"``)
or ``""``."""
from __future__ import annotations

from pathlib import Path

import duckdb

JOB = """
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'first-event.rate' = '2000', 'splits' = '2'{events});
CREATE TABLE per_auction (auction BIGINT, window_start TIMESTAMP(3), n BIGINT, top BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO per_auction SELECT auction, window_start, COUNT(*), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND)) GROUP BY auction, window_start, window_end;
CREATE MATERIALIZED VIEW sessions AS SELECT bidder, window_start, window_end, COUNT(*) AS bids, MAX(price) AS top
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '2' SECOND))
GROUP BY bidder, window_start, window_end;
CREATE MATERIALIZED VIEW per_auction_total AS SELECT auction, COUNT(*) AS n, MAX(price) AS top, SUM(price) AS total
FROM bids GROUP BY auction;
"""


def output(tmp: Path) -> dict[str, list]:
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        views = {view: con.sql(f"SELECT * FROM {view} ORDER BY ALL").fetchall()
                 for view in ("sessions", "per_auction_total")}
    finally:
        con.close()
    files = duckdb.sql(f"SELECT * FROM read_csv('{tmp / 'out'}/*.csv') ORDER BY ALL").fetchall()
    return {"per_auction": files, **views}

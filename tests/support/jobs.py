"""The issue's job, shared by the tests: its exact text, and the same job over Nexmark."""
from __future__ import annotations

PARQUET_SOURCE = "WITH ('connector' = 'filesystem', 'path' = 'data/bids.parquet', 'format' = 'parquet');"

ISSUE_JOB = f"""\
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) {PARQUET_SOURCE}

CREATE TABLE auction_counts (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, total BIGINT, top BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/auction_counts', 'format' = 'csv');

INSERT INTO auction_counts
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

CREATE MATERIALIZED VIEW channel_minutes AS
SELECT channel, window_start, window_end, COUNT(*) AS bids
FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE)
GROUP BY channel, window_start, window_end;
"""


def nexmark_source(events: int, rate: int = 1000) -> str:
    return f"WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '{events}', 'first-event.rate' = '{rate}');"


def issue_job_over_nexmark(events: int, rate: int = 1000) -> str:
    """The issue's job reading generated bids instead of a parquet file."""
    return ISSUE_JOB.replace(PARQUET_SOURCE, nexmark_source(events, rate))


def bids_over_nexmark(events: int, rate: int = 1000) -> str:
    """Only the issue's `bids` table, over generated bids."""
    return issue_job_over_nexmark(events, rate).split("\n\n")[0] + "\n"

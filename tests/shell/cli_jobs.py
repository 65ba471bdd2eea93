"""Small jobs for the command-line tests: the issue's job over 20,000 Nexmark events."""

BIDS = """\
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');
"""

ISSUE_JOB = BIDS + """
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

-- SESSION (Nexmark q11's shape): bids per bidder in sessions closed by 10 seconds without a bid,
-- in Flink's table function with PARTITION BY, and in the legacy GROUP BY SESSION(ts, gap).
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW bidder_sessions AS
SELECT bidder, window_start, window_end, COUNT(*) AS bids, MAX(price) AS top
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY bidder, window_start, window_end
HAVING COUNT(*) > 1;

CREATE MATERIALIZED VIEW legacy_sessions AS
SELECT bidder, SESSION_START(date_time, INTERVAL '10' SECOND) AS window_start,
  SESSION_ROWTIME(date_time, INTERVAL '10' SECOND) AS rowtime, COUNT(DISTINCT auction) AS auctions
FROM bids
GROUP BY SESSION(date_time, INTERVAL '10' SECOND), bidder;

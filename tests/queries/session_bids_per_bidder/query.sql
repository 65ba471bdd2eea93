-- SESSION (Nexmark q11's shape): bids per bidder in sessions that close after 3 seconds
-- without a bid, in Flink's table function with PARTITION BY and in the legacy
-- GROUP BY SESSION(ts, gap) with SESSION_START / SESSION_END / SESSION_ROWTIME.
-- Rows are at most 0.5 s out of order and the watermark lags 1 s: nothing is late.
-- Rows exactly 3 s apart share a session (Flink merges touching windows); NULL
-- bidders form sessions of their own key.
CREATE TABLE bids (
  ts TIMESTAMP(3), auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE bidder_sessions (bidder BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, total BIGINT, top BIGINT, auctions BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/bidder_sessions', 'format' = 'csv');

INSERT INTO bidder_sessions
SELECT bidder, window_start, window_end, COUNT(*), SUM(price), MAX(price), COUNT(DISTINCT auction)
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY bidder, window_start, window_end
HAVING COUNT(*) >= 2;

CREATE MATERIALIZED VIEW legacy_sessions AS
SELECT bidder, SESSION_START(ts, INTERVAL '3' SECOND) AS session_start,
       SESSION_END(ts, INTERVAL '3' SECOND) AS session_end,
       SESSION_ROWTIME(ts, INTERVAL '3' SECOND) AS rowtime,
       COUNT(*) FILTER (WHERE price > 100) AS big_bids, AVG(price) AS mean_price
FROM bids
GROUP BY SESSION(ts, INTERVAL '3' SECOND), bidder;

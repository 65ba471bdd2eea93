-- Every aggregate over the Flink window table function (positional arguments),
-- with NULL bidders and prices: COUNT(x), COUNT(DISTINCT x), SUM, MIN, MAX and
-- AVG skip NULLs, and a group whose prices are all NULL gives NULL sums.
CREATE TABLE bids (
  ts TIMESTAMP(3), channel VARCHAR, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW window_stats AS
SELECT window_start, window_end, window_time, channel,
       COUNT(*) AS n,
       COUNT(bidder) AS bidders,
       COUNT(DISTINCT bidder) AS distinct_bidders,
       SUM(price) AS total,
       MIN(price) AS low,
       MAX(price) AS high,
       AVG(price) AS mean,
       MAX(ts) AS last_ts
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, window_time, channel;

-- CUMULATE with an offset: per channel, the bids so far in each 15-second period
-- (periods start at :02, :17, :32, ...), every 5 seconds: [start, start + 5 s),
-- [start, start + 10 s), [start, start + 15 s). DISTINCT, FILTER and AVG over
-- growing windows.
CREATE TABLE bids (
  ts TIMESTAMP(3), channel VARCHAR, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW channel_so_far AS
SELECT channel, window_start, window_end, window_time, COUNT(*) AS bids,
       COUNT(DISTINCT bidder) AS bidders, AVG(price) AS mean,
       SUM(price) FILTER (WHERE bidder IS NOT NULL) AS known_total
FROM TABLE(CUMULATE(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND, INTERVAL '2' SECOND))
GROUP BY channel, window_start, window_end, window_time;

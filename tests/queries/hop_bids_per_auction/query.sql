-- HOP (Nexmark q5's shape): bids per auction in 10-second windows every 2 seconds,
-- in Flink's table function and in the legacy GROUP BY HOP(ts, slide, size) with
-- HOP_START / HOP_END, both with HAVING. A row counts in 5 windows; NULL prices
-- are skipped by SUM and MAX.
CREATE TABLE bids (
  ts TIMESTAMP(3), auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE hot_auctions (auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, total BIGINT, top BIGINT, bidders BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/hot_auctions', 'format' = 'csv');

INSERT INTO hot_auctions
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price), COUNT(DISTINCT bidder)
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end
HAVING COUNT(*) >= 2;

CREATE MATERIALIZED VIEW legacy_hop AS
SELECT auction, HOP_START(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS window_start,
       HOP_END(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS window_end,
       COUNT(*) FILTER (WHERE price > 50) AS big_bids
FROM bids
GROUP BY HOP(ts, INTERVAL '2' SECOND, INTERVAL '10' SECOND), auction;

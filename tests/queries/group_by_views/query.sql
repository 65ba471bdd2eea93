-- GROUP BY without a window: updating results kept by upsert in materialized views.
-- Every aggregate with retraction, HAVING (a channel enters the view once it has
-- 3 bids), a GROUP BY over a GROUP BY (how many auctions have n bids: an auction's
-- count moving from 2 to 3 retracts it from n = 2) and a global aggregate.
CREATE TABLE bids (
  ts TIMESTAMP(3), channel VARCHAR, auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW per_auction AS
SELECT auction, COUNT(*) AS n, COUNT(bidder) AS bidders, COUNT(DISTINCT bidder) AS distinct_bidders,
       SUM(price) AS total, MIN(price) AS low, MAX(price) AS high, AVG(price) AS mean,
       COUNT(*) FILTER (WHERE price > 10) AS big_bids, MAX(ts) AS last_ts
FROM bids GROUP BY auction;

CREATE MATERIALIZED VIEW busy_channels AS
SELECT channel, COUNT(*) AS n, SUM(price) AS total
FROM bids WHERE price IS NOT NULL GROUP BY channel HAVING COUNT(*) >= 3;

CREATE MATERIALIZED VIEW auctions_per_count AS
SELECT n, COUNT(*) AS auctions, MAX(auction) AS max_auction
FROM (SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction) GROUP BY n;

CREATE MATERIALIZED VIEW totals AS
SELECT COUNT(*) AS bids, SUM(price) AS total, COUNT(DISTINCT channel) AS channels FROM bids;

-- Top-N and deduplication without a window: updating results, kept by upsert on
-- (partition keys[, rank]), or as a multiset when no key is selected. The last one ranks
-- an updating input (bid counts per bidder, which rise as bids arrive).
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price INT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW top3 AS
SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid)
WHERE rn <= 3;

CREATE MATERIALIZED VIEW last_bid AS
SELECT auction, bidder, price FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY ts DESC) AS rn FROM bid)
WHERE rn = 1;

CREATE MATERIALIZED VIEW first_bid AS
SELECT auction, bidder, ts FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY ts ASC) AS rn FROM bid)
WHERE rn = 1;

CREATE MATERIALIZED VIEW busiest_bidders AS
SELECT bidder, n, rk FROM (
  SELECT *, RANK() OVER (ORDER BY n DESC) AS rk FROM (SELECT bidder, COUNT(*) AS n FROM bid GROUP BY bidder))
WHERE rk <= 3;

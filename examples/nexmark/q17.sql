-- Query 17: auction statistics report.
-- How many bids does an auction get per day, at which price levels, and what
-- are its lowest, highest, average and total prices? A GROUP BY without a
-- window: an updating result, one row per auction and day.

CREATE TABLE nexmark_q17 (
  auction BIGINT,
  "day" VARCHAR,
  total_bids BIGINT,
  rank1_bids BIGINT,
  rank2_bids BIGINT,
  rank3_bids BIGINT,
  min_price BIGINT,
  max_price BIGINT,
  avg_price DOUBLE,
  sum_price BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q17
SELECT
  auction,
  DATE_FORMAT(date_time, 'yyyy-MM-dd') AS "day",
  COUNT(*) AS total_bids,
  COUNT(*) FILTER (WHERE price < 10000) AS rank1_bids,
  COUNT(*) FILTER (WHERE price >= 10000 AND price < 1000000) AS rank2_bids,
  COUNT(*) FILTER (WHERE price >= 1000000) AS rank3_bids,
  MIN(price) AS min_price,
  MAX(price) AS max_price,
  AVG(price) AS avg_price,
  SUM(price) AS sum_price
FROM bid
GROUP BY auction, DATE_FORMAT(date_time, 'yyyy-MM-dd');

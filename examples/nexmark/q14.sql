-- Query 14: calculation.
-- Bids in a price band, with the price in euros, the part of the day the bid
-- was made in, and how many times 'c' occurs in its extra field. (The suite
-- counts with a user-defined function, count_char; weir has no UDFs yet, and
-- the same count is the length the string loses when its 'c's are removed.)

CREATE TABLE nexmark_q14 (
  auction BIGINT,
  bidder BIGINT,
  price DECIMAL(23, 3),
  bid_time_type VARCHAR,
  date_time TIMESTAMP(3),
  extra VARCHAR,
  c_counts BIGINT
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q14
SELECT
  auction,
  bidder,
  0.908 * price AS price,
  CASE
    WHEN HOUR(date_time) >= 8 AND HOUR(date_time) <= 18 THEN 'dayTime'
    WHEN HOUR(date_time) <= 6 OR HOUR(date_time) >= 20 THEN 'nightTime'
    ELSE 'otherTime'
  END AS bid_time_type,
  date_time,
  extra,
  CAST(CHAR_LENGTH(extra) - CHAR_LENGTH(REPLACE(extra, 'c', '')) AS BIGINT) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000;

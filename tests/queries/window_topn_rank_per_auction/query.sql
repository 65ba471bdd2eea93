-- Window Top-N directly over a window table function, with RANK(): the bids
-- with the two highest prices per auction and 10-second window, ties sharing
-- a rank (and all kept), into a materialized view. WHERE bounds the rank from
-- the left too; the rank column is left out of the output.
CREATE TABLE bids (
  auction BIGINT, bidder VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW top_bids AS
SELECT window_start, window_end, auction, bidder, price FROM (
  SELECT *, RANK() OVER (PARTITION BY window_start, window_end, auction ORDER BY price DESC) AS price_rank
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
) WHERE 2 >= price_rank AND price_rank >= 1;

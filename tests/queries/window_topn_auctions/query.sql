-- Window Top-N over a window aggregate: the two auctions with the largest
-- total price in every 10-second window. Ties on the total are broken by the
-- other columns, ascending (window_rank's tie-break): in the window at
-- 00:00:30 auctions 1 and 4 both total 25, and auction 1 takes rank 2.
CREATE TABLE bids (
  auction BIGINT, bidder VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE top_auctions (window_start TIMESTAMP(3), window_end TIMESTAMP(3), auction BIGINT, price BIGINT, rownum BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/top_auctions', 'format' = 'csv');

INSERT INTO top_auctions
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
  FROM (
    SELECT window_start, window_end, auction, SUM(price) AS price
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, auction
  )
) WHERE rownum <= 2;

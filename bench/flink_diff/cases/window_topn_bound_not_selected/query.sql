CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

-- A window Top-N whose inner SELECT keeps window_start only: window_end still comes
-- from the window table function, as Flink resolves it.
CREATE TABLE top1 (window_start TIMESTAMP(3), auction BIGINT, price BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top1', 'format' = 'json');
INSERT INTO top1
SELECT window_start, auction, price FROM (
  SELECT window_start, auction, price,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
) WHERE rn = 1;

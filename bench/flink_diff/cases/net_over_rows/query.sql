CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (auction BIGINT, date_time TIMESTAMP(3), price BIGINT, running_sum BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'json');
INSERT INTO out1
SELECT auction, date_time, price,
       SUM(price) OVER (PARTITION BY auction ORDER BY date_time ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
FROM bids;

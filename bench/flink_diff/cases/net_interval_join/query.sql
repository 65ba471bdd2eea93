CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (auction BIGINT, first_price BIGINT, next_price BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'json');
INSERT INTO out1
SELECT a.auction, a.price, b.price
FROM bids AS a, bids AS b
WHERE a.auction = b.auction AND a.price < b.price
  AND b.date_time BETWEEN a.date_time AND a.date_time + INTERVAL '5' SECOND;

CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (n BIGINT, auctions BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'debezium-json');
INSERT INTO out1
SELECT n, COUNT(*) FROM (SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction) GROUP BY n;

CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (channel STRING, n BIGINT, total BIGINT, high BIGINT, bidders BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'debezium-json');
INSERT INTO out1
SELECT channel, COUNT(*), SUM(price), MAX(price), COUNT(DISTINCT bidder)
FROM bids
GROUP BY channel;

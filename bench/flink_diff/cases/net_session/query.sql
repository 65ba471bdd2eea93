CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (bidder BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'json');
INSERT INTO out1
SELECT bidder, window_start, window_end, COUNT(*), SUM(price)
FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(date_time), INTERVAL '6' SECOND))
GROUP BY bidder, window_start, window_end;

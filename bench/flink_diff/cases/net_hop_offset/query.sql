CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (channel STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT, low BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'json');
INSERT INTO out1
SELECT channel, window_start, window_end, COUNT(*), MIN(price)
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '5' SECOND, INTERVAL '15' SECOND, INTERVAL '2' SECOND))
GROUP BY channel, window_start, window_end;

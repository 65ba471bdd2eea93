CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (channel STRING, wstart TIMESTAMP(3), wend TIMESTAMP(3), n BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'json');
INSERT INTO out1
SELECT channel, TUMBLE_START(date_time, INTERVAL '10' SECOND), TUMBLE_END(date_time, INTERVAL '10' SECOND), COUNT(*)
FROM bids
GROUP BY channel, TUMBLE(date_time, INTERVAL '10' SECOND);

CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE out1 (window_start TIMESTAMP(3), auction BIGINT, n BIGINT, channel_n BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'json');
INSERT INTO out1
SELECT a.window_start, a.auction, a.n, c.n
FROM (
  SELECT auction, window_start, window_end, COUNT(*) AS n
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end
) AS a
JOIN (
  SELECT window_start, window_end, COUNT(DISTINCT channel) AS n
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) AS c
ON a.window_start = c.window_start AND a.window_end = c.window_end;

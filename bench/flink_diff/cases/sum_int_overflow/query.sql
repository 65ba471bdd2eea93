CREATE TABLE big (
  ts TIMESTAMP(3), i INT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/big.csv', 'format' = 'csv');
-- Flink's SUM(INT) is INT and wraps around past 2^31 - 1.
CREATE TABLE sums (total INT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/sums', 'format' = 'json');
INSERT INTO sums
SELECT SUM(i) FROM TABLE(TUMBLE(TABLE big, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;

CREATE TABLE nums (
  ts TIMESTAMP(3), k STRING, i INT, d DECIMAL(10, 2), x DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/nums.csv', 'format' = 'csv');

-- SUM(INT) is INT in Flink: it goes into an INT column as it is.
CREATE TABLE sums (k STRING, total INT, total_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/sums', 'format' = 'json');
INSERT INTO sums
SELECT k, SUM(i), CAST(SUM(i) AS STRING)
FROM TABLE(TUMBLE(TABLE nums, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

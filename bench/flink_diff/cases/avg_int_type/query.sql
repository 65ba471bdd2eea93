CREATE TABLE nums (
  ts TIMESTAMP(3), k STRING, i INT, d DECIMAL(10, 2), x DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/nums.csv', 'format' = 'csv');

-- AVG keeps its argument's type in Flink: AVG(INT) is INT (truncated), AVG(DECIMAL) a DECIMAL.
CREATE TABLE win_avg (k STRING, avg_i INT, avg_i_text STRING, avg_d_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/win_avg', 'format' = 'json');
CREATE TABLE group_avg (k STRING, avg_i BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/group_avg', 'format' = 'debezium-json');
INSERT INTO win_avg
SELECT k, AVG(i), CAST(AVG(i) AS STRING), CAST(AVG(d) AS STRING)
FROM TABLE(TUMBLE(TABLE nums, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;
INSERT INTO group_avg SELECT k, AVG(i) FROM nums GROUP BY k;

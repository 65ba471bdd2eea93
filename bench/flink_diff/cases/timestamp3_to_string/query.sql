CREATE TABLE t (
  ts TIMESTAMP(3), k STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/t.csv', 'format' = 'csv');
-- A TIMESTAMP(3) column holds milliseconds: microseconds in the file are truncated where
-- the value enters, and CAST(... AS STRING) shows three digits.
CREATE TABLE texts (ts TIMESTAMP(3), ts_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/texts', 'format' = 'json');
CREATE TABLE latest (k STRING, latest TIMESTAMP(3), latest_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/latest', 'format' = 'debezium-json');
INSERT INTO texts SELECT ts, CAST(ts AS STRING) FROM t;
INSERT INTO latest SELECT k, MAX(ts), CAST(MAX(ts) AS STRING) FROM t GROUP BY k;

CREATE TABLE nums (
  ts TIMESTAMP(3), k STRING, i INT, d DECIMAL(10, 2), x DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/nums.csv', 'format' = 'csv');

-- ROUND(x, n) rounds half away from zero on the decimal value: 41.05 -> 41.1.
CREATE TABLE rounded (d DECIMAL(10, 2), d1_text STRING, d0_text STRING, x1 DOUBLE, lit_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/rounded', 'format' = 'json');
INSERT INTO rounded
SELECT d, CAST(ROUND(d, 1) AS STRING), CAST(ROUND(d) AS STRING), ROUND(x, 1), CAST(ROUND(41.05, 1) AS STRING)
FROM nums;

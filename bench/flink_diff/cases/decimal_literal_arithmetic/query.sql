CREATE TABLE nums (
  ts TIMESTAMP(3), k STRING, i INT, d DECIMAL(10, 2), x DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/nums.csv', 'format' = 'csv');

-- A literal such as 1.5 is DECIMAL(p, s) in Flink; the text of each result shows its scale.
CREATE TABLE arith (i INT, times_text STRING, div_text STRING, plus_text STRING, lit_text STRING, times_double DOUBLE)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/arith', 'format' = 'json');
INSERT INTO arith
SELECT i, CAST(i * 1.5 AS STRING), CAST(i / 2.0 AS STRING), CAST(d + 0.25 AS STRING),
       CAST(3.0 AS STRING), i * 0.1
FROM nums;

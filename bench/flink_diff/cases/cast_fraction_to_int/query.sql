CREATE TABLE nums (
  ts TIMESTAMP(3), k STRING, i INT, d DECIMAL(10, 2), x DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/nums.csv', 'format' = 'csv');

-- CAST and TRY_CAST of a fractional value to an integer type truncate toward zero.
CREATE TABLE casts (x DOUBLE, x_big BIGINT, d_int INT, x_try INT, lit BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/casts', 'format' = 'json');
INSERT INTO casts
SELECT x, CAST(x AS BIGINT), CAST(d AS INT), TRY_CAST(x AS INT), CAST(-94.7 AS BIGINT) FROM nums;

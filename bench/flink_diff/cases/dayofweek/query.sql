CREATE TABLE s (
  ts TIMESTAMP(3), a STRING, b STRING, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/s.json', 'format' = 'json');

-- DAYOFWEEK: 1 = Sunday ... 7 = Saturday (2024-01-07 is a Sunday).
CREATE TABLE days (ts TIMESTAMP(3), dow BIGINT, dow_date BIGINT, dow_extract BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/days', 'format' = 'json');
INSERT INTO days SELECT ts, DAYOFWEEK(ts), DAYOFWEEK(CAST(ts AS DATE)), EXTRACT(DOW FROM ts) FROM s;

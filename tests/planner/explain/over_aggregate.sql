-- OVER aggregates: arguments and partition keys that are expressions are computed before the
-- exchange; the aggregates come out as _over0, ... and the projection is a calc after them.
CREATE TABLE readings (ts TIMESTAMP(3), sensor VARCHAR, temp DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'nexmark', 'table' = 'bid');

CREATE MATERIALIZED VIEW last_ten AS
SELECT sensor, ts, AVG(temp) OVER w AS avg_temp, MAX(temp) OVER w - MIN(temp) OVER w AS spread
FROM readings
WINDOW w AS (PARTITION BY sensor ORDER BY ts ROWS BETWEEN 9 PRECEDING AND CURRENT ROW);

CREATE MATERIALIZED VIEW last_hour AS
SELECT ts, COUNT(*) FILTER (WHERE temp > 30) OVER (PARTITION BY LOWER(sensor) ORDER BY ts
         RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW) AS hot_readings
FROM readings WHERE sensor <> 'test';

CREATE MATERIALIZED VIEW running AS
SELECT ts, SUM(temp) OVER (ORDER BY ts) AS total FROM readings;

-- OVER aggregates ordered by event time (Flink's OVER aggregation): each reading comes out once the
-- watermark passes its time, with aggregates over its frame: the last rows (ROWS), the last interval of
-- time (RANGE, which includes readings of the same time), or everything so far (UNBOUNDED, the default
-- frame of ORDER BY). Late readings would be dropped and counted; this input has none.
CREATE TABLE readings (
  ts TIMESTAMP(3), sensor VARCHAR, temp DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/readings.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW last_four AS
SELECT sensor, ts, temp,
       COUNT(temp) OVER w AS n, AVG(temp) OVER w AS avg_temp, MIN(temp) OVER w AS min_temp, MAX(temp) OVER w AS max_temp
FROM readings
WINDOW w AS (PARTITION BY sensor ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW);

CREATE MATERIALIZED VIEW last_minute AS
SELECT sensor, ts,
       SUM(temp) OVER (PARTITION BY sensor ORDER BY ts RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING AND CURRENT ROW) AS temp_sum,
       COUNT(*) FILTER (WHERE temp > 20) OVER (PARTITION BY sensor ORDER BY ts RANGE BETWEEN INTERVAL '1' MINUTE PRECEDING AND CURRENT ROW) AS warm
FROM readings
WHERE sensor <> 's3';

CREATE MATERIALIZED VIEW so_far AS
SELECT ts, sensor, COUNT(*) OVER (ORDER BY ts) AS readings_so_far,
       MAX(temp) OVER (ORDER BY ts) - MIN(temp) OVER (ORDER BY ts) AS spread
FROM readings;

CREATE MATERIALIZED VIEW warm_streaks AS
SELECT sensor, ts, warm_in_last_3
FROM (SELECT sensor, ts, SUM(CASE WHEN temp > 20 THEN 1 ELSE 0 END) OVER (PARTITION BY sensor ORDER BY ts ROWS 2 PRECEDING) AS warm_in_last_3
      FROM readings) AS t
WHERE warm_in_last_3 = 3;

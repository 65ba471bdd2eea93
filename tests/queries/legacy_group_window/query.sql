-- Flink's legacy group window: GROUP BY TUMBLE(ts, size) with TUMBLE_START,
-- TUMBLE_END and TUMBLE_ROWTIME, DOUBLE aggregates, into a materialized view.
CREATE TABLE readings (
  ts TIMESTAMP(3), sensor VARCHAR, temperature DOUBLE,
  WATERMARK FOR ts AS ts - INTERVAL '30' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/readings.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW sensor_minutes AS
SELECT sensor,
       TUMBLE_START(ts, INTERVAL '1' MINUTE) AS window_start,
       TUMBLE_END(ts, INTERVAL '1' MINUTE) AS window_end,
       TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) AS rowtime,
       COUNT(*) AS readings,
       AVG(temperature) AS avg_temp,
       MAX(temperature) - MIN(temperature) AS spread
FROM readings
GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), sensor;

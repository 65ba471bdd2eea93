-- A ';'-separated csv with malformed rows (a value that is not a number, a
-- missing field, a timestamp that is not one, an extra field): with
-- 'csv.ignore-parse-errors' they are skipped and counted, the rest aggregated.
CREATE TABLE readings (
  ts TIMESTAMP(3), sensor VARCHAR, reading BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
  'connector' = 'filesystem',
  'path' = 'data/readings.csv',
  'format' = 'csv',
  'csv.field-delimiter' = ';',
  'csv.ignore-parse-errors' = 'true'
);

CREATE MATERIALIZED VIEW sensor_totals AS
SELECT sensor, window_start, window_end, COUNT(*) AS n, SUM(reading) AS total
FROM TABLE(TUMBLE(TABLE readings, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY sensor, window_start, window_end;

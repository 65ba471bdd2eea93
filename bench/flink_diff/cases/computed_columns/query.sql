-- Computed columns: an expression, an event time parsed from text with a watermark on
-- it, and a processing-time attribute (declared, not read: its values are wall-clock).
CREATE TABLE raw_events (
  s STRING, v BIGINT,
  v2 AS v * 2,
  ts AS TO_TIMESTAMP(s),
  pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/raw.csv', 'format' = 'csv');
CREATE TABLE out1 (window_start TIMESTAMP(3), n BIGINT, total2 BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'json');
INSERT INTO out1
SELECT window_start, COUNT(*), SUM(v2)
FROM TABLE(TUMBLE(TABLE raw_events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;

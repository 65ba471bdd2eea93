-- The watermark advances after each batch (here three rows), not after each
-- row: a row behind an earlier row of its own batch is not late, and one
-- whose window fired on an earlier batch's watermark is dropped and counted.
SET 'weir.source.batch-size' = '3';

CREATE TABLE events (
  ts TIMESTAMP(3), k VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/events.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW key_counts AS
SELECT k, window_start, window_end, COUNT(*) AS cnt
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

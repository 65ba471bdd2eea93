CREATE TABLE events (
  ts TIMESTAMP(3), k STRING, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/events.csv', 'format' = 'csv');

-- An OVER aggregate ordered by event time drops the rows behind the watermark.
CREATE TABLE running_totals (ts TIMESTAMP(3), v BIGINT, n BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/running_totals', 'format' = 'json');
INSERT INTO running_totals
SELECT ts, v, COUNT(*) OVER w, SUM(v) OVER w
FROM events
WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);

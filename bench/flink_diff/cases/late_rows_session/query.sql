CREATE TABLE events (
  ts TIMESTAMP(3), k STRING, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/events.csv', 'format' = 'csv');

-- The row at 12.5 s moves the watermark to 10.5 s: the session [1 s, 5 s) of k=a has
-- fired, so the rows at 4 s and 9.999 s that arrive next are late for Flink.
CREATE TABLE sessions (k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/sessions', 'format' = 'json');
INSERT INTO sessions
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY k, window_start, window_end;

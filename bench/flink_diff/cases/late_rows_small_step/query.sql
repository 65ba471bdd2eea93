-- The watermark passes 10 s by a step of 150 ms (9.9 s -> 10.05 s): the window
-- [0 s, 10 s) fires and the row at 5 s that arrives next is late. (With Flink's default
-- 'pipeline.auto-watermark-interval' of 200 ms a step under 200 ms waits for a timer,
-- so this row's fate would depend on timing; the harness sets 0: a watermark per row.)
CREATE TABLE events (
  ts TIMESTAMP(3), k STRING, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/events.csv', 'format' = 'csv');
CREATE TABLE windows (window_start TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/windows', 'format' = 'json');
INSERT INTO windows
SELECT window_start, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;

CREATE TABLE events (
  ts TIMESTAMP(3), k STRING, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/events', 'format' = 'csv');

-- Two files (two splits) with rows behind the watermark, judged row after row. Each file starts
-- at 100 s (watermark 98 s), then goes back. part-0: 97.5 s joins [100 s, 103 s); 94 s is late
-- (its own window closed, and [97.5 s, 103 s) does not reach it); 95 s joins, and then 93 s,
-- which 95 s now reaches, joins too. part-1: 90 s and 92 s are late, 96 s opens a session that
-- 93.5 s then joins. Flink (parallelism 1) reads one file after the other, in an order that
-- varies (measured both), and its watermark is then the first file's: each file starts at the
-- same time, so every row meets the watermark 98 s in both engines and either order; the keys
-- of the two files differ, so their rows never meet.
CREATE TABLE sessions (k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/sessions', 'format' = 'json');
INSERT INTO sessions
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY k, window_start, window_end;

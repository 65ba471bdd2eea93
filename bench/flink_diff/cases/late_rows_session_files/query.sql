CREATE TABLE events (
  ts TIMESTAMP(3), k STRING, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/events', 'format' = 'csv');

-- Two files (two splits), each with rows behind the watermark. part-1: 12.5 s moves the watermark
-- to 10.5 s; 9.6 s then starts a session with 12.5 s, and 7.4 s (its own window closed) joins it
-- because that session is open when it arrives; 1.5 s is late (b's session [2 s, 5 s) fired).
-- part-0 (all after part-1's rows): 41 s moves the watermark to 39 s; 35 s and 36 s are late,
-- 38.5 s joins 41 s. Flink (parallelism 1) reads one file after the other, part-1 first here
-- (measured: with the later rows in part-1 instead, it judged every row of part-0 against
-- part-1's watermark, 39 s, and dropped them all), so its watermark is per file here as weir's
-- is; weir's answer is the same in either order (README: lateness is per split).
CREATE TABLE sessions (k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/sessions', 'format' = 'json');
INSERT INTO sessions
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY k, window_start, window_end;

-- Issue 12's example: TUMBLE 10 s, watermark delay 2 s. The row at 12.5 s moves the
-- watermark to 10.5 s, so the window [0 s, 10 s) has fired when the rows at 9.0 s and
-- 9.999 s arrive: Flink drops both ({count 2, sum 30}), whatever the batch size.
CREATE TABLE events (
  ts TIMESTAMP(3), k STRING, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/events.csv', 'format' = 'csv');

CREATE TABLE windows (k STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/windows', 'format' = 'json');

INSERT INTO windows
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

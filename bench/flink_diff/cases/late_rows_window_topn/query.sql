CREATE TABLE events (
  ts TIMESTAMP(3), k STRING, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/events.csv', 'format' = 'csv');

-- A window Top-N over the window table function drops rows whose window has fired.
CREATE TABLE top2 (window_start TIMESTAMP(3), ts TIMESTAMP(3), v BIGINT, rn BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top2', 'format' = 'json');
INSERT INTO top2
SELECT window_start, ts, v, rn FROM (
  SELECT window_start, window_end, ts, v, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC) AS rn
  FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
) WHERE rn <= 2;

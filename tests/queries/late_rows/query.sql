-- Late rows: read one row per batch, so the watermark (the largest ts - 2 s so
-- far) advances after every row. A row whose window already fired is dropped
-- and counted: the window fires once the watermark reaches window_end - 1 ms.
SET 'weir.source.batch-size' = '1';

CREATE TABLE events (
  ts TIMESTAMP(3), k VARCHAR, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/events.csv', 'format' = 'csv');

CREATE TABLE key_windows (k VARCHAR, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/key_windows', 'format' = 'csv');

INSERT INTO key_windows
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

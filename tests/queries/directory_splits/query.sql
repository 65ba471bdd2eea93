-- A directory of csv files is one source, each file a split with its own
-- watermark; the source's watermark is their minimum. File a.csv runs ahead
-- to 00:00:30 while b.csv and c.csv are still in the first window: their rows
-- are not late. One row per batch, so the watermark moves after every row.
SET 'weir.source.batch-size' = '1';

CREATE TABLE events (
  ts TIMESTAMP(3), v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/events', 'format' = 'csv');

CREATE TABLE window_totals (window_start TIMESTAMP(3), window_end TIMESTAMP(3), events BIGINT, total BIGINT, first_ts TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = 'out/window_totals', 'format' = 'parquet');

INSERT INTO window_totals
SELECT window_start, window_end, COUNT(*), SUM(v), MIN(ts)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;

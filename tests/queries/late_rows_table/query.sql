-- Late rows kept: 'source.late-rows.table' sends every row of `events` that a
-- window drops as late to the table late_events of the job's database, with
-- the operator that dropped it and the watermark it was behind. One row per
-- batch, so the watermark (the largest ts - 2 s so far) moves after every row.
-- A row late for both windows is kept twice, once per operator; the HOP
-- window (10 s sliding by 5 s) still takes some rows the TUMBLE drops.
SET 'weir.source.batch-size' = '1';

CREATE TABLE events (
  ts TIMESTAMP(3), k VARCHAR, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/events.csv', 'format' = 'csv',
        'source.late-rows.table' = 'late_events');

CREATE MATERIALIZED VIEW key_windows AS
SELECT k, window_start, window_end, COUNT(*) AS cnt, SUM(v) AS total
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

CREATE MATERIALIZED VIEW hop_totals AS
SELECT window_start, window_end, k, SUM(v) AS total
FROM TABLE(HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
GROUP BY window_start, window_end, ROLLUP (k);

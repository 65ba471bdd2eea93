-- Lateness is decided per row whatever the batch size (here three rows): a row
-- meets the watermark of the rows before it, also those of its own batch
-- (02 b is late behind 25 a), as in Flink, where the watermark moves after
-- every record; a row whose window fired is dropped and counted.
SET 'weir.source.batch-size' = '3';

CREATE TABLE events (
  ts TIMESTAMP(3), k VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/events.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW key_counts AS
SELECT k, window_start, window_end, COUNT(*) AS cnt
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

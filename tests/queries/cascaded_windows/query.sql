-- Cascading windows: a view counts page views per 10 seconds; its window_time
-- (window_end - 1 ms) is a time attribute, windowed again per minute.
CREATE TABLE page_views (
  ts TIMESTAMP(3), page VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/page_views.csv', 'format' = 'csv');

CREATE VIEW views_10s AS
SELECT page, window_start, window_end, window_time, COUNT(*) AS views
FROM TABLE(TUMBLE(TABLE page_views, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY page, window_start, window_end, window_time;

CREATE MATERIALIZED VIEW views_minute AS
SELECT page, window_start, window_end, SUM(views) AS views, MAX(views) AS peak_10s, COUNT(*) AS active_windows
FROM TABLE(TUMBLE(TABLE views_10s, DESCRIPTOR(window_time), INTERVAL '1' MINUTE))
GROUP BY page, window_start, window_end;

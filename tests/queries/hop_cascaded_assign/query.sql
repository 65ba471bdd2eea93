-- HOP's window_time stays a time attribute: views per page in 10-second windows
-- every 5 seconds, then the busiest such window per page per 30 seconds. And HOP
-- without an aggregate: every row once per window it belongs to.
CREATE TABLE page_views (
  ts TIMESTAMP(3), page VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/page_views.csv', 'format' = 'csv');

CREATE VIEW views_hop AS
SELECT page, window_start, window_end, window_time, COUNT(*) AS views
FROM TABLE(HOP(TABLE page_views, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
GROUP BY page, window_start, window_end, window_time;

CREATE MATERIALIZED VIEW busiest_window AS
SELECT page, window_start, window_end, MAX(views) AS peak, COUNT(*) AS windows
FROM TABLE(TUMBLE(TABLE views_hop, DESCRIPTOR(window_time), INTERVAL '30' SECOND))
GROUP BY page, window_start, window_end;

CREATE MATERIALIZED VIEW view_windows AS
SELECT ts, page, window_start, window_end, window_time
FROM TABLE(HOP(TABLE page_views, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND));

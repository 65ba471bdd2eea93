-- A live pipeline: clicks generated at 1,000 a second (wall clock), counted per page in
-- 5-second windows into a materialized view that changes while the job runs.
--   weir run examples/live.sql --db live.duckdb      (runs until Ctrl-C; the same command resumes)
--   weir query "SELECT * FROM page_views ORDER BY window_start DESC, page LIMIT 5" --db live.duckdb
CREATE TABLE clicks (
  user_id INT,
  page INT,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (
  'connector' = 'datagen',
  'rows-per-second' = '1000',
  'fields.user_id.min' = '1', 'fields.user_id.max' = '500',
  'fields.page.min' = '1', 'fields.page.max' = '5',
  'fields.ts.max-past' = '500ms'
);

CREATE MATERIALIZED VIEW page_views AS
SELECT page, window_start, window_end, COUNT(*) AS views, COUNT(DISTINCT user_id) AS users
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' SECOND))
GROUP BY page, window_start, window_end;

WITH views_10s AS (
  SELECT page, time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' - INTERVAL '1 millisecond' AS window_time,
         count(*) AS views
  FROM read_csv('data/page_views.csv', header = true, columns = {'ts': 'TIMESTAMP', 'page': 'VARCHAR'})
  GROUP BY ALL
)
SELECT page, time_bucket(INTERVAL '1 minute', window_time) AS window_start,
       time_bucket(INTERVAL '1 minute', window_time) + INTERVAL '1 minute' AS window_end,
       sum(views) AS views, max(views) AS peak_10s, count(*) AS active_windows
FROM views_10s
GROUP BY ALL

WITH views AS (
  SELECT * FROM read_csv('data/page_views.csv', header = true, columns = {'ts': 'TIMESTAMP', 'page': 'VARCHAR'})
), views_hop AS (
  SELECT page, time_bucket(INTERVAL '5 seconds', ts) - j * INTERVAL '5 seconds' + INTERVAL '10 seconds'
           - INTERVAL '1 millisecond' AS window_time, count(*) AS views
  FROM views, range(2) AS w(j)
  GROUP BY ALL
)
SELECT page, time_bucket(INTERVAL '30 seconds', window_time) AS window_start,
       time_bucket(INTERVAL '30 seconds', window_time) + INTERVAL '30 seconds' AS window_end,
       max(views) AS peak, count(*) AS windows
FROM views_hop
GROUP BY ALL

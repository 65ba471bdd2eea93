SELECT ts, page, time_bucket(INTERVAL '5 seconds', ts) - j * INTERVAL '5 seconds' AS window_start,
       time_bucket(INTERVAL '5 seconds', ts) - j * INTERVAL '5 seconds' + INTERVAL '10 seconds' AS window_end,
       time_bucket(INTERVAL '5 seconds', ts) - j * INTERVAL '5 seconds' + INTERVAL '10 seconds' - INTERVAL '1 millisecond' AS window_time
FROM read_csv('data/page_views.csv', header = true, columns = {'ts': 'TIMESTAMP', 'page': 'VARCHAR'}), range(2) AS w(j)

SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end,
       count(*) AS events, sum(v) AS total, min(ts) AS first_ts
FROM read_csv('data/events/*.csv', header = true, columns = {'ts': 'TIMESTAMP', 'v': 'BIGINT'})
GROUP BY ALL

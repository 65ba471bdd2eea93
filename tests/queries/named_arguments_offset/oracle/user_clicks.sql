SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:03') AS window_start,
       time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:03') + INTERVAL '10 seconds' AS window_end,
       user_name, count(*) AS clicks, count(DISTINCT url) AS pages
FROM read_json('data/clicks.json', columns = {'user_name': 'VARCHAR', 'url': 'VARCHAR', 'ts': 'TIMESTAMP'})
GROUP BY ALL

SELECT time_bucket(INTERVAL '5 minutes', ts) AS window_start, time_bucket(INTERVAL '5 minutes', ts) + INTERVAL '5 minutes' AS window_end,
       user_id, count(*) AS clicks
FROM (SELECT user_id::BIGINT AS user_id, ts FROM read_csv('data/web_clicks.csv', header = true, columns = {'ts': 'TIMESTAMP', 'user_id': 'INTEGER', 'page': 'VARCHAR'}) UNION ALL SELECT user_id, ts FROM read_csv('data/app_clicks.csv', header = true, columns = {'ts': 'TIMESTAMP', 'user_id': 'BIGINT', 'screen': 'VARCHAR'}))
GROUP BY ALL

SELECT 'web' AS channel, user_id::BIGINT AS user_id, page AS place, ts FROM read_csv('data/web_clicks.csv', header = true, columns = {'ts': 'TIMESTAMP', 'user_id': 'INTEGER', 'page': 'VARCHAR'})
UNION ALL
SELECT 'app', user_id, screen, ts FROM read_csv('data/app_clicks.csv', header = true, columns = {'ts': 'TIMESTAMP', 'user_id': 'BIGINT', 'screen': 'VARCHAR'}) WHERE screen <> 'home'

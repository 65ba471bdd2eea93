SELECT user_id || '@web' AS who, ts FROM read_csv('data/web_clicks.csv', header = true, columns = {'ts': 'TIMESTAMP', 'user_id': 'INTEGER', 'page': 'VARCHAR'}) WHERE page = '/cart'
UNION ALL
SELECT user_id || '@app', ts FROM read_csv('data/app_clicks.csv', header = true, columns = {'ts': 'TIMESTAMP', 'user_id': 'BIGINT', 'screen': 'VARCHAR'}) WHERE screen = 'cart'

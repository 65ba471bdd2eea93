SELECT ts, user_name
FROM read_csv('data/clicks.csv', header = true,
              columns = {'ts': 'TIMESTAMP', 'user_name': 'VARCHAR', 'url': 'VARCHAR'})
ORDER BY ts LIMIT 2

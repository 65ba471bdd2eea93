WITH o AS (
  SELECT *, time_bucket(INTERVAL '1 minute', row_time) AS ws
  FROM read_csv('data/orders.csv', header = true, columns = {'row_time': 'TIMESTAMP', 'num': 'INTEGER', 'id': 'VARCHAR'})),
s AS (
  SELECT *, time_bucket(INTERVAL '1 minute', row_time) AS ws
  FROM read_csv('data/shipments.csv', header = true, columns = {'row_time': 'TIMESTAMP', 'num': 'BIGINT', 'id': 'VARCHAR'}))
SELECT id, ws AS window_start FROM o WHERE (num, ws) NOT IN (SELECT num, ws FROM s)

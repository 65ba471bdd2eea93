WITH o AS (
  SELECT *, time_bucket(INTERVAL '1 minute', row_time) AS ws
  FROM read_csv('data/orders.csv', header = true, columns = {'row_time': 'TIMESTAMP', 'num': 'INTEGER', 'id': 'VARCHAR'})),
s AS (
  SELECT *, time_bucket(INTERVAL '1 minute', row_time) AS ws
  FROM read_csv('data/shipments.csv', header = true, columns = {'row_time': 'TIMESTAMP', 'num': 'BIGINT', 'id': 'VARCHAR'}))
SELECT o.id, o.ws AS window_start FROM o WHERE o.id <> 'O0' AND EXISTS (SELECT 1 FROM s WHERE s.num = o.num AND s.ws = o.ws AND s.id <> 'S3')

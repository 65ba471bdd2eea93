WITH l AS (
  SELECT *, time_bucket(INTERVAL '1 minute', row_time) AS ws
  FROM read_csv('data/left_events.csv', header = true, columns = {'row_time': 'TIMESTAMP', 'num': 'INTEGER', 'id': 'VARCHAR'})),
r AS (
  SELECT *, time_bucket(INTERVAL '1 minute', row_time) AS ws
  FROM read_csv('data/right_events.csv', header = true, columns = {'row_time': 'TIMESTAMP', 'num': 'INTEGER', 'id': 'VARCHAR'}))
SELECT l.id AS l_id, r.id AS r_id, l.ws + INTERVAL '1 minute' AS window_end
FROM l LEFT JOIN r ON l.num = r.num AND l.ws = r.ws

WITH p AS (
  SELECT DISTINCT id, name, time_bucket(INTERVAL '10 seconds', date_time) AS starttime
  FROM read_csv('data/person.csv', header = true, columns = {'id': 'BIGINT', 'name': 'VARCHAR', 'date_time': 'TIMESTAMP'})),
a AS (
  SELECT seller, time_bucket(INTERVAL '10 seconds', date_time) AS starttime, count(*) AS auctions, max(reserve) AS top_reserve
  FROM read_csv('data/auction.csv', header = true, columns = {'id': 'BIGINT', 'seller': 'BIGINT', 'reserve': 'BIGINT', 'date_time': 'TIMESTAMP'})
  GROUP BY ALL)
SELECT p.id, p.name, p.starttime, a.auctions, a.top_reserve FROM p JOIN a ON p.id = a.seller AND p.starttime = a.starttime

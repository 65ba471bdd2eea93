-- The first 3 rows in file order (the source has one split).
SELECT ts, user_name FROM (
  SELECT *, row_number() OVER () AS arrival
  FROM read_csv('data/clicks.csv', header = true,
                columns = {'ts': 'TIMESTAMP', 'user_name': 'VARCHAR', 'url': 'VARCHAR'}))
WHERE url <> '/c' ORDER BY arrival LIMIT 3

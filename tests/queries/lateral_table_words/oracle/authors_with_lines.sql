SELECT r.n, count(*) AS authors
FROM (SELECT author, count(*) AS written FROM read_csv('data/lines.csv', header = true, columns = {'ts': 'TIMESTAMP', 'author': 'VARCHAR', 'line': 'VARCHAR'}) GROUP BY author) AS a, range(1, a.written + 1) AS r(n)
GROUP BY r.n

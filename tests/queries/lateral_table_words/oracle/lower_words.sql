WITH l AS (SELECT row_number() OVER () AS id, ts, author, lower(line) AS line FROM read_csv('data/lines.csv', header = true, columns = {'ts': 'TIMESTAMP', 'author': 'VARCHAR', 'line': 'VARCHAR'})),
     w AS (SELECT id, unnest(string_split(coalesce(line, ''), ' ')) AS word FROM l)
SELECT l.ts, l.author, w.word FROM l LEFT JOIN (SELECT * FROM w WHERE word <> '') AS w USING (id)

SELECT ts, author, word, length(word)::INT AS len
FROM (SELECT ts, author, unnest(string_split(coalesce(line, ''), ' ')) AS word FROM read_csv('data/lines.csv', header = true, columns = {'ts': 'TIMESTAMP', 'author': 'VARCHAR', 'line': 'VARCHAR'}))
WHERE word <> ''

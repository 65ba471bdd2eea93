SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end,
       author, count(*) AS words, sum(length(word)) AS letters
FROM (SELECT ts, author, unnest(string_split(coalesce(line, ''), ' ')) AS word FROM read_csv('data/lines.csv', header = true, columns = {'ts': 'TIMESTAMP', 'author': 'VARCHAR', 'line': 'VARCHAR'}))
WHERE word <> ''
GROUP BY ALL

SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end,
       page, count(*) AS visits
FROM read_csv('data/visits.csv', header = true)
GROUP BY ALL
HAVING count(*) > 1

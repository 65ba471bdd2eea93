SELECT sensor, time_bucket(INTERVAL '10 seconds', ts) AS window_start,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end,
       count(*) AS n, sum(reading) AS total
FROM read_csv('data/readings.csv', header = true, delim = ';', ignore_errors = true,
              columns = {'ts': 'TIMESTAMP', 'sensor': 'VARCHAR', 'reading': 'BIGINT'})
GROUP BY ALL

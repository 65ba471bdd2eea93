SELECT sensor, time_bucket(INTERVAL '1 minute', ts) AS window_start,
       time_bucket(INTERVAL '1 minute', ts) + INTERVAL '1 minute' AS window_end,
       time_bucket(INTERVAL '1 minute', ts) + INTERVAL '1 minute' - INTERVAL '1 millisecond' AS rowtime,
       count(*) AS readings, avg(temperature) AS avg_temp, max(temperature) - min(temperature) AS spread
FROM read_csv('data/readings.csv', header = true,
              columns = {'ts': 'TIMESTAMP', 'sensor': 'VARCHAR', 'temperature': 'DOUBLE'})
GROUP BY ALL

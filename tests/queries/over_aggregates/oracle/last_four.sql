SELECT sensor, ts, temp, count(temp) OVER w AS n, avg(temp) OVER w AS avg_temp, min(temp) OVER w AS min_temp, max(temp) OVER w AS max_temp
FROM read_csv('data/readings.csv', header = true, columns = {'ts': 'TIMESTAMP', 'sensor': 'VARCHAR', 'temp': 'DOUBLE'}) WINDOW w AS (PARTITION BY sensor ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)

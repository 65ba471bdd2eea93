SELECT sensor, ts, sum(temp) OVER w AS temp_sum, count(*) FILTER (WHERE temp > 20) OVER w AS warm
FROM read_csv('data/readings.csv', header = true, columns = {'ts': 'TIMESTAMP', 'sensor': 'VARCHAR', 'temp': 'DOUBLE'}) WHERE sensor <> 's3' WINDOW w AS (PARTITION BY sensor ORDER BY ts RANGE BETWEEN INTERVAL '1 minute' PRECEDING AND CURRENT ROW)

SELECT time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '2000-01-01 00:00:15') AS window_start,
       time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '2000-01-01 00:00:15') + INTERVAL '1 minute' AS window_end,
       upper(symbol) AS symbol, CASE WHEN qty >= 100 THEN 'block' ELSE 'retail' END AS size_class,
       count(*) AS trades, sum(qty) AS total_qty, sum(qty * price) AS notional, max(price) - min(price) AS price_range
FROM read_csv('data/trades.csv', header = true)
WHERE qty > 0 AND symbol <> 'test'
GROUP BY ALL

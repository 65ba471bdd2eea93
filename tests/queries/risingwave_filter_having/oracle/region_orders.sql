SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end,
       region, count(*) AS orders, count(*) FILTER (WHERE amount >= 100) AS big_orders,
       sum(amount) FILTER (WHERE status = 'paid') AS paid_amount
FROM read_csv('data/orders.csv', header = true)
GROUP BY ALL
HAVING count(*) >= 2 AND max(amount) >= 20

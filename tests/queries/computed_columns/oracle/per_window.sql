SELECT time_bucket(INTERVAL '5 seconds', ordered_at::TIMESTAMP) AS window_start,
       time_bucket(INTERVAL '5 seconds', ordered_at::TIMESTAMP) + INTERVAL '5 seconds' AS window_end,
       sum(amount) AS amount, sum(amount * 2) AS doubled, count(*) AS orders
FROM read_csv('data/orders.csv', header = true,
              columns = {'id': 'BIGINT', 'amount': 'INT', 'cur': 'VARCHAR', 'ordered_at': 'VARCHAR'})
GROUP BY ALL

SELECT time_bucket(INTERVAL '1 hour', created) AS window_start,
       time_bucket(INTERVAL '1 hour', created) + INTERVAL '1 hour' AS window_end,
       count(*) AS orders, sum(amount * 100) AS cents
FROM read_json('data/orders.json', columns = {'order_id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'BIGINT',
                                              'status': 'VARCHAR', 'created': 'TIMESTAMP'})
WHERE status = 'paid' AND amount * 100 >= 1000
GROUP BY ALL

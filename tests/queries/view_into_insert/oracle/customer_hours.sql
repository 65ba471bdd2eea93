-- Order 9 (09:20) arrives after order 8 (11:45) moved the watermark to 11:15: its window
-- [09:00, 10:00) has fired, so it is late and dropped, as in Flink (judged per row, by the
-- watermark of the rows before it in the file).
WITH arrived AS (
  SELECT *, max(created) OVER (ORDER BY order_id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
              - INTERVAL '30 minutes' AS arrival_watermark
  FROM read_json('data/orders.json', columns = {'order_id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'BIGINT',
                                                'status': 'VARCHAR', 'created': 'TIMESTAMP'})
)
SELECT customer, time_bucket(INTERVAL '1 hour', created) AS window_start,
       time_bucket(INTERVAL '1 hour', created) + INTERVAL '1 hour' AS window_end,
       count(*) AS orders, sum(amount * 100) AS cents, max(created) AS last_order
FROM arrived
WHERE status = 'paid'
  AND (arrival_watermark IS NULL
       OR time_bucket(INTERVAL '1 hour', created) + INTERVAL '1 hour' - INTERVAL '1 millisecond' > arrival_watermark)
GROUP BY ALL

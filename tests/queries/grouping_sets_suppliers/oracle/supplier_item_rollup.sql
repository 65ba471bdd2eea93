-- HOP 10 min sliding by 5 min: each bid is in the window of its 5-minute slice and the one before.
WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
    columns = {'bidtime': 'TIMESTAMP', 'price': 'DOUBLE', 'item': 'VARCHAR', 'supplier_id': 'VARCHAR'})
), windows AS (
  SELECT *, time_bucket(INTERVAL '5 minutes', bidtime) - j * INTERVAL '5 minutes' AS window_start
  FROM bids, range(2) AS hops(j)
)
SELECT window_start, window_start + INTERVAL '10 minutes' AS window_end, supplier_id, item,
       sum(price) AS price, max(price) AS top
FROM windows
GROUP BY window_start, ROLLUP (supplier_id, item)

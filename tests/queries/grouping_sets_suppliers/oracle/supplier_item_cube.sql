-- CUMULATE 10 min by 5 min steps: [start, start + 5 min) and [start, start + 10 min).
WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
    columns = {'bidtime': 'TIMESTAMP', 'price': 'DOUBLE', 'item': 'VARCHAR', 'supplier_id': 'VARCHAR'})
), windows AS (
  SELECT *, time_bucket(INTERVAL '10 minutes', bidtime) AS window_start,
         time_bucket(INTERVAL '10 minutes', bidtime) + k * INTERVAL '5 minutes' AS window_end
  FROM bids, range(1, 3) AS steps(k)
)
SELECT window_start, window_end, supplier_id, item, grouping(supplier_id, item) AS set_id,
       count(DISTINCT item) AS items, sum(price) AS price
FROM windows
WHERE bidtime < window_end AND price > 1
GROUP BY window_start, window_end, CUBE (supplier_id, item)

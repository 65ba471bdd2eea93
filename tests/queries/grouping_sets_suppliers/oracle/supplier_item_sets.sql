WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
    columns = {'bidtime': 'TIMESTAMP', 'price': 'DOUBLE', 'item': 'VARCHAR', 'supplier_id': 'VARCHAR'})
)
SELECT time_bucket(INTERVAL '10 minutes', bidtime) AS window_start,
       time_bucket(INTERVAL '10 minutes', bidtime) + INTERVAL '10 minutes' AS window_end,
       supplier_id, item, grouping(item) AS item_rolled_up, grouping(supplier_id, item) AS set_id,
       sum(price) AS price, count(*) AS bids
FROM bids
GROUP BY GROUPING SETS ((1, 2, supplier_id, item), (1, 2, supplier_id), (1, 2))

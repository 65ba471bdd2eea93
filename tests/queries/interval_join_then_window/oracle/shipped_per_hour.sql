WITH o AS (SELECT * FROM read_csv('data/orders.csv', header = true, columns = {'order_time': 'TIMESTAMP', 'order_id': 'BIGINT', 'amount': 'INTEGER'})), s AS (SELECT * FROM read_csv('data/shipments.csv', header = true, columns = {'ship_time': 'TIMESTAMP', 'order_id': 'BIGINT', 'carrier': 'VARCHAR'}))
SELECT time_bucket(INTERVAL '1 hour', o.order_time) AS window_start, s.carrier, count(*) AS shipped
FROM o JOIN s ON o.order_id = s.order_id
AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '1 hour'
GROUP BY ALL

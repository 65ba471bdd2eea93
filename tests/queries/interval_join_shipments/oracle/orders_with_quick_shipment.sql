WITH o AS (SELECT * FROM read_csv('data/orders.csv', header = true, columns = {'order_time': 'TIMESTAMP', 'order_id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'INTEGER'})), s AS (SELECT * FROM read_csv('data/shipments.csv', header = true, columns = {'ship_time': 'TIMESTAMP', 'order_id': 'INTEGER', 'carrier': 'VARCHAR'}))
SELECT o.order_id, o.amount, s.carrier, s.ship_time
FROM o LEFT JOIN s ON o.order_id = s.order_id
AND s.ship_time >= o.order_time AND s.ship_time < o.order_time + INTERVAL '20 minutes'

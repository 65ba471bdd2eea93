WITH o AS (SELECT * FROM read_csv('data/orders.csv', header = true, columns = {'order_time': 'TIMESTAMP', 'order_id': 'BIGINT', 'customer': 'VARCHAR', 'amount': 'INTEGER'})), s AS (SELECT * FROM read_csv('data/shipments.csv', header = true, columns = {'ship_time': 'TIMESTAMP', 'order_id': 'INTEGER', 'carrier': 'VARCHAR'}))
SELECT o.order_id AS o_id, s.order_id AS s_id, s.carrier, o.order_time, s.ship_time
FROM s FULL JOIN o ON s.order_id = o.order_id
AND o.order_time <= s.ship_time AND o.order_time + INTERVAL '10 minutes' > s.ship_time

-- An interval join: keys hashed on both sides, the interval as a bound on the difference of the two
-- time attributes; the ON's condition on one input filters it before the join, the projection is a calc after it.
CREATE TABLE orders (order_time TIMESTAMP(3), order_id BIGINT, amount INT,
  WATERMARK FOR order_time AS order_time - INTERVAL '2' SECOND) WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE shipments (ship_time TIMESTAMP(3), order_id INT, carrier VARCHAR,
  WATERMARK FOR ship_time AS ship_time - INTERVAL '2' SECOND) WITH ('connector' = 'nexmark', 'table' = 'bid');

CREATE MATERIALIZED VIEW shipped AS
SELECT o.order_id, s.carrier, o.order_time, s.ship_time
FROM orders o JOIN shipments s
ON o.order_id = s.order_id AND s.ship_time BETWEEN o.order_time - INTERVAL '1' HOUR AND o.order_time + INTERVAL '10' MINUTE
AND o.amount > 10;

CREATE MATERIALIZED VIEW unshipped AS
SELECT o.order_id, o.order_time
FROM orders o LEFT JOIN shipments s
ON o.order_id = s.order_id AND s.ship_time > o.order_time AND s.ship_time <= o.order_time + INTERVAL '1' DAY
WHERE s.order_id IS NULL;

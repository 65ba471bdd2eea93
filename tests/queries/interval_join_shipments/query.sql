-- Interval joins (Flink's): each order with the shipments of the same order id whose time lies in an
-- interval around the order's. Rows are buffered until the watermark passes the last time a row of the
-- other input could match them; outer rows are emitted with NULLs then. The windowed count over a join
-- checks that the join holds its watermark back (by the interval's reach), so no joined row is late.
CREATE TABLE orders (
  order_time TIMESTAMP(3), order_id BIGINT, customer VARCHAR, amount INT,
  WATERMARK FOR order_time AS order_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/orders.csv', 'format' = 'csv');

CREATE TABLE shipments (
  ship_time TIMESTAMP(3), order_id INT, carrier VARCHAR,
  WATERMARK FOR ship_time AS ship_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/shipments.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW shipped_within_hour AS
SELECT o.order_id, o.customer, s.carrier, o.order_time, s.ship_time
FROM orders o JOIN shipments s
ON o.order_id = s.order_id AND s.ship_time BETWEEN o.order_time - INTERVAL '30' SECOND AND o.order_time + INTERVAL '1' HOUR;

CREATE MATERIALIZED VIEW orders_with_quick_shipment AS
SELECT o.order_id, o.amount, s.carrier, s.ship_time
FROM orders o LEFT JOIN shipments s
ON o.order_id = s.order_id AND s.ship_time >= o.order_time AND s.ship_time < o.order_time + INTERVAL '20' MINUTE;

CREATE MATERIALIZED VIEW all_orders_and_shipments AS
SELECT o.order_id AS o_id, s.order_id AS s_id, s.carrier, o.order_time, s.ship_time
FROM shipments s FULL OUTER JOIN orders o
ON s.order_id = o.order_id AND o.order_time <= s.ship_time AND o.order_time + INTERVAL '10' MINUTE > s.ship_time;

CREATE MATERIALIZED VIEW shipped_per_hour AS
WITH shipped AS (
  SELECT o.order_id, o.order_time, s.carrier
  FROM orders o JOIN shipments s
  ON o.order_id = s.order_id AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '1' HOUR
)
SELECT window_start, carrier, COUNT(*) AS shipped
FROM TABLE(TUMBLE(TABLE shipped, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
GROUP BY window_start, window_end, carrier;

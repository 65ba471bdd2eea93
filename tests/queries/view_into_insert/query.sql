-- A view (filtering, computing and renaming the time column) windowed by an
-- INSERT, and a view over that view windowed by a materialized view.
CREATE TABLE orders (
  order_id BIGINT, customer VARCHAR, amount BIGINT, status VARCHAR, created TIMESTAMP(3),
  WATERMARK FOR created AS created - INTERVAL '30' MINUTE
) WITH ('connector' = 'filesystem', 'path' = 'data/orders.json', 'format' = 'json');

CREATE VIEW paid_orders AS
SELECT order_id, customer, amount * 100 AS cents, created AS order_time
FROM orders
WHERE status = 'paid';

CREATE VIEW big_paid_orders AS
SELECT * FROM paid_orders WHERE cents >= 1000;

CREATE TABLE customer_hours (customer VARCHAR, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  orders BIGINT, cents BIGINT, last_order TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = 'out/customer_hours', 'format' = 'csv');

INSERT INTO customer_hours
SELECT customer, window_start, window_end, COUNT(*), SUM(cents), MAX(order_time)
FROM TABLE(TUMBLE(TABLE paid_orders, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
GROUP BY customer, window_start, window_end;

CREATE MATERIALIZED VIEW big_order_hours AS
SELECT window_start, window_end, COUNT(*) AS orders, SUM(cents) AS cents
FROM TUMBLE(big_paid_orders, order_time, INTERVAL '1' HOUR)
GROUP BY window_start, window_end;

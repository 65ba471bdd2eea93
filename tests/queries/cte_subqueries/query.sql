-- Common table expressions are views scoped to their statement: a CTE may read the CTEs before it,
-- name its columns (`big(id, total, at)`), be read twice, and hide a table of the same name. Subqueries
-- in FROM nest with aliases. The same WITH works in INSERT INTO and CREATE MATERIALIZED VIEW.
CREATE TABLE orders (
  order_time TIMESTAMP(3), order_id BIGINT, customer VARCHAR, amount INT,
  WATERMARK FOR order_time AS order_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/orders.csv', 'format' = 'csv');

CREATE TABLE big_orders (order_id BIGINT, total INT, label VARCHAR)
WITH ('connector' = 'filesystem', 'path' = 'out/big_orders', 'format' = 'csv');

INSERT INTO big_orders
WITH big(id, total, at) AS (SELECT order_id, amount, order_time FROM orders WHERE amount >= 250),
     labelled AS (SELECT id, total, CASE WHEN total >= 400 THEN 'huge' ELSE 'big' END AS label FROM big)
SELECT id, total, label FROM labelled;

CREATE MATERIALIZED VIEW customer_amounts_per_hour AS
WITH orders AS (SELECT customer, amount * 2 AS doubled, order_time FROM orders),
     doubled AS (SELECT * FROM orders)
SELECT window_start, customer, SUM(doubled) AS doubled_total
FROM TABLE(TUMBLE(TABLE doubled, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
GROUP BY window_start, window_end, customer;

CREATE MATERIALIZED VIEW small_and_large AS
WITH priced AS (SELECT order_id, amount FROM orders)
SELECT 'small' AS size, order_id FROM priced WHERE amount < 100
UNION ALL
SELECT 'large', order_id FROM priced WHERE amount > 400;

CREATE MATERIALIZED VIEW nested AS
SELECT outer_q.customer, outer_q.cents
FROM (
  SELECT inner_q.customer, inner_q.amount * 100 AS cents
  FROM (SELECT customer, amount FROM orders WHERE customer <> 'dee') AS inner_q
  WHERE inner_q.amount > 50
) AS outer_q;

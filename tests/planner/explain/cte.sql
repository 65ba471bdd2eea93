-- Common table expressions: planned where they are used, like views scoped to the statement.
CREATE TABLE orders (ts TIMESTAMP(3), customer VARCHAR, amount INT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'nexmark', 'table' = 'bid');

EXPLAIN
WITH big(who, amount, at) AS (SELECT customer, amount, ts FROM orders WHERE amount > 100),
     shouted AS (SELECT UPPER(who) AS who, amount, at FROM big)
SELECT who, amount FROM shouted WHERE amount < 1000;

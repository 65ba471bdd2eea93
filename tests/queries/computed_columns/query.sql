-- Computed columns, as in Flink's DDL: `doubled AS amount * 2`, an event-time
-- column computed from a string (`ts AS TO_TIMESTAMP(ordered_at)`) that carries
-- the WATERMARK, and a processing-time column (`pt AS PROCTIME()`) for a lookup
-- join. They are computed as rows are read; a sink table's computed column is
-- not written (the query gives the physical columns only).
CREATE TABLE orders (
  id BIGINT, amount INT, cur VARCHAR, ordered_at VARCHAR,
  doubled AS amount * 2,
  ts AS TO_TIMESTAMP(ordered_at),
  pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/orders.csv', 'format' = 'csv');

CREATE TABLE rates (cur VARCHAR, rate INT)
WITH ('connector' = 'filesystem', 'path' = 'data/rates.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW per_window AS
SELECT window_start, window_end, SUM(amount) AS amount, SUM(doubled) AS doubled, COUNT(*) AS orders
FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '5' SECOND))
GROUP BY window_start, window_end;

CREATE MATERIALIZED VIEW converted AS
SELECT o.id, o.doubled * r.rate AS converted
FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.pt AS r ON o.cur = r.cur;

CREATE TABLE archive (id BIGINT, amount INT, tripled AS amount * 3)
WITH ('connector' = 'filesystem', 'path' = 'out/archive', 'format' = 'csv');

INSERT INTO archive SELECT id, amount FROM orders;

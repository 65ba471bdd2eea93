-- Semi and anti window joins: orders with (or without) a shipment of the same num in the
-- same 1-minute window, spelled with IN, EXISTS, NOT IN and NOT EXISTS. NOT IN is null-aware:
-- a shipment with a NULL num in a window makes NOT IN unknown for every order of that window.
CREATE TABLE orders (
  row_time TIMESTAMP(3), num INT, id VARCHAR,
  WATERMARK FOR row_time AS row_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/orders.csv', 'format' = 'csv');

CREATE TABLE shipments (
  row_time TIMESTAMP(3), num BIGINT, id VARCHAR,
  WATERMARK FOR row_time AS row_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/shipments.csv', 'format' = 'csv');

CREATE VIEW windowed_orders AS
SELECT * FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(row_time), INTERVAL '1' MINUTES));

CREATE MATERIALIZED VIEW shipped_in AS
SELECT id, num, window_start FROM windowed_orders
WHERE (num, window_start, window_end) IN (
  SELECT num, window_start, window_end FROM TABLE(TUMBLE(TABLE shipments, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)));

CREATE MATERIALIZED VIEW shipped_exists AS
SELECT O.id, O.window_start FROM windowed_orders O
WHERE O.id <> 'O0' AND EXISTS (
  SELECT * FROM TABLE(TUMBLE(TABLE shipments, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)) S
  WHERE O.num = S.num AND O.window_start = S.window_start AND O.window_end = S.window_end AND S.id <> 'S3');

CREATE MATERIALIZED VIEW unshipped_not_in AS
SELECT id, window_start FROM windowed_orders
WHERE (num, window_start, window_end) NOT IN (
  SELECT num, window_start, window_end FROM TABLE(TUMBLE(TABLE shipments, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)));

CREATE MATERIALIZED VIEW unshipped_not_exists AS
SELECT O.id, O.num, O.window_start FROM windowed_orders O
WHERE NOT EXISTS (
  SELECT * FROM TABLE(TUMBLE(TABLE shipments, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)) S
  WHERE O.num = S.num AND O.window_start = S.window_start AND O.window_end = S.window_end);

-- An interval join followed by a window: a shipment joins an order up to an hour older, so the
-- join holds its watermark back by an hour (IntervalJoin.output_watermark). Shipment 1 arrives
-- after the shipments' watermark has passed 10:00 while its order is from 09:40: a window fed the
-- join's raw input watermark would have fired [09:00, 10:00) already and dropped the joined row as
-- late. The filler rows (orders and shipments that match nothing) move both watermarks on, batch by
-- batch, before it arrives — at every parallelism.
CREATE TABLE orders (
  order_time TIMESTAMP(3), order_id BIGINT, amount INT,
  WATERMARK FOR order_time AS order_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/orders.csv', 'format' = 'csv');

CREATE TABLE shipments (
  ship_time TIMESTAMP(3), order_id BIGINT, carrier VARCHAR,
  WATERMARK FOR ship_time AS ship_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/shipments.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW shipped_per_hour AS
WITH shipped AS (
  SELECT o.order_id, o.order_time, s.carrier
  FROM orders o JOIN shipments s
  ON o.order_id = s.order_id AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '1' HOUR
)
SELECT window_start, carrier, COUNT(*) AS shipped
FROM TABLE(TUMBLE(TABLE shipped, DESCRIPTOR(order_time), INTERVAL '1' HOUR))
GROUP BY window_start, window_end, carrier;

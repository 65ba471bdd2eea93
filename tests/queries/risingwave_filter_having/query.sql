-- RisingWave's short window spelling, FILTER (WHERE ...) on COUNT(*) and SUM,
-- and HAVING on an aggregate that is not selected; results as parquet.
CREATE TABLE orders (
  ts TIMESTAMP(3), region VARCHAR, amount BIGINT, status VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/orders.csv', 'format' = 'csv');

CREATE TABLE region_orders (
  window_start TIMESTAMP(3), window_end TIMESTAMP(3), region VARCHAR,
  orders BIGINT, big_orders BIGINT, paid_amount BIGINT
) WITH ('connector' = 'filesystem', 'path' = 'out/region_orders', 'format' = 'parquet');

INSERT INTO region_orders
SELECT window_start, window_end, region,
       COUNT(*),
       COUNT(*) FILTER (WHERE amount >= 100),
       SUM(amount) FILTER (WHERE status = 'paid')
FROM TUMBLE(orders, ts, INTERVAL '10' SECOND)
GROUP BY window_start, window_end, region
HAVING COUNT(*) >= 2 AND MAX(amount) >= 20;

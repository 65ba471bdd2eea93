-- GROUPING SETS, ROLLUP and CUBE over the three sliced windows (the bids of
-- Flink's window aggregation page, and a few more; one item is NULL, so a NULL
-- key of the data and the NULL of a set that leaves `item` out both occur, told
-- apart by GROUPING). window_start and window_end stay outside the sets.
CREATE TABLE bids (
  bidtime TIMESTAMP(3), price DOUBLE, item VARCHAR, supplier_id VARCHAR,
  WATERMARK FOR bidtime AS bidtime - INTERVAL '1' MINUTE
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW supplier_item_sets AS
SELECT window_start, window_end, supplier_id, item, GROUPING(item) AS item_rolled_up,
       GROUPING_ID(supplier_id, item) AS set_id, SUM(price) AS price, COUNT(*) AS bids
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, GROUPING SETS ((supplier_id, item), (supplier_id), ());

CREATE MATERIALIZED VIEW supplier_item_rollup AS
SELECT window_start, window_end, supplier_id, item, SUM(price) AS price, MAX(price) AS top
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
GROUP BY window_start, window_end, ROLLUP (supplier_id, item);

CREATE MATERIALIZED VIEW supplier_item_cube AS
SELECT window_start, window_end, supplier_id, item, GROUPING_ID(supplier_id, item) AS set_id,
       COUNT(DISTINCT item) AS items, SUM(price) AS price
FROM TABLE(CUMULATE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES))
WHERE price > 1
GROUP BY window_start, window_end, CUBE (supplier_id, item);

-- A tumbling window in Flink's window table function: the same DAG as the other spellings.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW auction_windows AS
SELECT auction, window_start, window_end, COUNT(*) AS bids, AVG(price) AS avg_price
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

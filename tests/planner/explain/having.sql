-- HAVING filters the window results over keys, bounds and aggregates.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW busy_auctions AS
SELECT auction, window_end, COUNT(*) AS bids, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end
HAVING COUNT(*) >= 3 AND MAX(price) > 500;

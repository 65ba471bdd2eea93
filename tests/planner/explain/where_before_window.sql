-- WHERE filters input rows in a Calc before the window aggregate.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW expensive_bids AS
SELECT channel, window_start, window_end, COUNT(*) AS bids, MIN(price) AS cheapest
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' MINUTE))
WHERE price > 1000 AND channel <> 'Google'
GROUP BY channel, window_start, window_end;

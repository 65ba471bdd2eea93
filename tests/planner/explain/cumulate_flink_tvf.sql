-- A cumulating window with an offset: per channel, totals so far in the minute, every 10 seconds.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW channel_so_far AS
SELECT channel, window_start, window_end, COUNT(*) AS bids, SUM(price) AS total, COUNT(DISTINCT bidder) AS bidders
FROM TABLE(CUMULATE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND, INTERVAL '1' MINUTE, INTERVAL '5' SECOND))
GROUP BY channel, window_start, window_end;

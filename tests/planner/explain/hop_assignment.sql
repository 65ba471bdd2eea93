-- HOP without an aggregate: each row once per window it belongs to.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW bid_windows AS
SELECT auction, price, window_start, window_end, window_time
FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '5' SECOND, INTERVAL '15' SECOND));

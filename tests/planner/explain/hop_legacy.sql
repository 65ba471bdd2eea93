-- The legacy group window: GROUP BY HOP(ts, slide, size) with HOP_START and HOP_END, the same plan.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW hot_auctions AS
SELECT auction, HOP_START(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS window_start,
  HOP_END(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS window_end, COUNT(*) AS bids
FROM bids
GROUP BY HOP(date_time, INTERVAL '2' SECOND, INTERVAL '10' SECOND), auction;

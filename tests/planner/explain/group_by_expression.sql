-- Group keys that are expressions are computed in a Calc, so that the exchange can hash them.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE MATERIALIZED VIEW price_bands AS
SELECT price - price % 1000 AS band, UPPER(channel) AS channel, window_start, COUNT(DISTINCT bidder) AS bidders
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' MINUTE))
GROUP BY price - price % 1000, UPPER(channel), window_start, window_end;

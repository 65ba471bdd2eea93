-- No window: a projection and filter, row by row, into csv files.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE TABLE big_bids (auction BIGINT, price_usd DOUBLE, channel VARCHAR, date_time TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = 'out/big_bids', 'format' = 'csv');

INSERT INTO big_bids
SELECT auction, price * 0.908 AS price_usd, LOWER(channel), date_time
FROM bids
WHERE price > 5000;

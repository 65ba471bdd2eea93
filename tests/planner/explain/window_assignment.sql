-- A window table function without aggregation: each row gets its window's bounds.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE TABLE windowed_bids (auction BIGINT, price BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  window_time TIMESTAMP(3))
WITH ('connector' = 'print');

INSERT INTO windowed_bids
SELECT auction, price, window_start, window_end, window_time
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND, INTERVAL '5' SECOND))
WHERE price < 100;

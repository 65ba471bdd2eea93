-- A window aggregate without group keys: one group per window, all rows to one subtask.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');
CREATE TABLE totals (window_start TIMESTAMP(3), window_end TIMESTAMP(3), bids BIGINT, revenue BIGINT)
WITH ('connector' = 'print', 'print-identifier' = 'totals');

INSERT INTO totals
SELECT window_start, window_end, COUNT(*), SUM(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' MINUTE))
GROUP BY window_start, window_end;

-- Query 7: highest bid.
-- The bids at the highest price of each 10-second window.
--
-- The suite joins every bid with the windows' maximum prices on
-- `date_time BETWEEN window_end - 10 s AND window_end`; here both sides carry
-- the same tumbling window and meet in a window join, so a bid is compared
-- with the maximum of its own window only.

CREATE TABLE nexmark_q7 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  date_time TIMESTAMP(3),
  extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q7
SELECT B.auction, B.bidder, B.price, B.date_time, B.extra
FROM (
  SELECT auction, bidder, price, date_time, extra, window_start, window_end
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
) B
JOIN (
  SELECT MAX(price) AS maxprice, window_start, window_end
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice AND B.window_start = B1.window_start AND B.window_end = B1.window_end;

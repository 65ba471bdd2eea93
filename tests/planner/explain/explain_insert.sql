-- EXPLAIN INSERT inside a file prints that statement's plan; the INSERT after it is the job.
CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '20000', 'first-event.rate' = '1000');

CREATE TABLE auction_counts (auction BIGINT, window_start TIMESTAMP(3), bids BIGINT)
WITH ('connector' = 'blackhole');

EXPLAIN INSERT INTO auction_counts
SELECT auction, window_start, COUNT(*)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

INSERT INTO auction_counts
SELECT auction, window_start, COUNT(*) FILTER (WHERE price > 100)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' MINUTE))
GROUP BY auction, window_start, window_end;

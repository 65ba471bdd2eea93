-- weir's first example: tumbling windows over the built-in Nexmark bid generator.
-- Run it with:  weir run examples/nexmark_tumble.sql
-- then:         weir query "SELECT * FROM channel_minutes ORDER BY window_start, bids DESC LIMIT 10"

-- 1,000,000 bids spread over 100 seconds of event time, deterministic for the seed.
CREATE TABLE bids (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel VARCHAR,
  date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH (
  'connector' = 'nexmark',
  'table' = 'bid',
  'events' = '1000000',
  'first-event.rate' = '10000'
);

-- Per auction and 10-second window: number of bids, total and top price, into csv part files.
CREATE TABLE auction_counts (
  auction BIGINT, window_start TIMESTAMP(3), window_end TIMESTAMP(3),
  bids BIGINT, total BIGINT, top BIGINT
) WITH ('connector' = 'filesystem', 'path' = 'out/auction_counts', 'format' = 'csv');

INSERT INTO auction_counts
SELECT auction, window_start, window_end, COUNT(*), SUM(price), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
GROUP BY auction, window_start, window_end;

-- Bids per channel and minute, kept as a table in the job's DuckDB database (weir.duckdb).
CREATE MATERIALIZED VIEW channel_minutes AS
SELECT channel, window_start, window_end, COUNT(*) AS bids
FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE)
GROUP BY channel, window_start, window_end;

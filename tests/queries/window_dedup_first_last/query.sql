-- Window deduplication: ROW_NUMBER() = 1 ordered by the time attribute keeps
-- the first row (ASC) or the last row (DESC) of each key and window; the rank
-- column is left out (Flink's no-rank-number output). The first two bids of
-- auction 2 share a timestamp: the tie is broken by the other columns,
-- ascending, so eve's bid is kept rather than zed's.
CREATE TABLE bids (
  auction BIGINT, bidder VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE first_bids (auction BIGINT, bidder VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  window_start TIMESTAMP(3), window_end TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = 'out/first_bids', 'format' = 'csv');

CREATE TABLE last_bids (bidder VARCHAR, auction BIGINT, price BIGINT, date_time TIMESTAMP(3), window_start TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = 'out/last_bids', 'format' = 'csv');

INSERT INTO first_bids
SELECT auction, bidder, price, date_time, window_start, window_end FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, auction ORDER BY date_time ASC) AS rownum
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
) WHERE rownum = 1;

INSERT INTO last_bids
SELECT bidder, auction, price, date_time, window_start FROM (
  SELECT bidder, auction, price, date_time, window_start, window_end,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end, bidder ORDER BY date_time DESC) AS rownum
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '20' SECOND))
) WHERE rownum <= 1;

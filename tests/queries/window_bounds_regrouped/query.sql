-- A window aggregate's bounds keep their meaning under new names: GROUP BY them
-- again is a window aggregate of the same windows (append-only, as in Flink), and
-- a join on them a window join. Nexmark q5 in its two spellings (the window table
-- function, and the legacy GROUP BY HOP(...) with HOP_START / HOP_END), and a
-- window aggregate over a subquery that kept the names window_start, window_end.
CREATE TABLE bids (
  ts TIMESTAMP(3), auction BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW hot_tvf AS
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime, AuctionBids.endtime
FROM (
  SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND))
  GROUP BY auction, window_start, window_end
) AS AuctionBids
JOIN (
  SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
  FROM (
    SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
    FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '6' SECOND))
    GROUP BY auction, window_start, window_end
  ) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn;

CREATE MATERIALIZED VIEW hot_legacy AS
SELECT AuctionBids.auction, AuctionBids.num, AuctionBids.starttime, AuctionBids.endtime
FROM (
  SELECT B1.auction, count(*) AS num,
         HOP_START(B1.ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS starttime,
         HOP_END(B1.ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS endtime
  FROM bids B1
  GROUP BY B1.auction, HOP(B1.ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND)
) AS AuctionBids
JOIN (
  SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
  FROM (
    SELECT count(*) AS num,
           HOP_START(B2.ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS starttime,
           HOP_END(B2.ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND) AS endtime
    FROM bids B2
    GROUP BY B2.auction, HOP(B2.ts, INTERVAL '2' SECOND, INTERVAL '6' SECOND)
  ) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
   AND AuctionBids.num >= MaxBids.maxn;

CREATE MATERIALIZED VIEW busiest AS
SELECT window_start, window_end, window_time, MAX(top) AS top, COUNT(*) AS auctions
FROM (
  SELECT auction, window_start, window_end, window_time, MAX(price) AS top
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND))
  GROUP BY auction, window_start, window_end, window_time
)
GROUP BY window_start, window_end, window_time;

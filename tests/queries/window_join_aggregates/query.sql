-- Nexmark q8's shape: people who registered and opened auctions in the same 10-second
-- window, both inputs window aggregates joined on their renamed window bounds.
CREATE TABLE person (
  id BIGINT, name VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/person.csv', 'format' = 'csv');

CREATE TABLE auction (
  id BIGINT, seller BIGINT, reserve BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/auction.csv', 'format' = 'csv');

CREATE TABLE new_sellers (id BIGINT, name VARCHAR, starttime TIMESTAMP(3), auctions BIGINT, top_reserve BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/new_sellers', 'format' = 'csv');

INSERT INTO new_sellers
SELECT P.id, P.name, P.starttime, A.auctions, A.top_reserve
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller, window_start AS starttime, window_end AS endtime, COUNT(*) AS auctions, MAX(reserve) AS top_reserve
  FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;

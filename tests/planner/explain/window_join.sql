-- A window join (Nexmark q8's shape with a FULL OUTER join and a key of another type):
-- both inputs windowed alike, keys hashed before the join, the projection after it.
CREATE TABLE person (
  id BIGINT, name VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'person', 'events' = '1000');
CREATE TABLE auction (
  id BIGINT, seller INT, reserve BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'auction', 'events' = '1000');

CREATE MATERIALIZED VIEW sellers AS
SELECT P.id, P.name, A.auctions, COALESCE(P.starttime, A.starttime) AS starttime
FROM (SELECT id, name, window_start AS starttime, window_end AS endtime
      FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
      GROUP BY id, name, window_start, window_end) P
FULL OUTER JOIN (SELECT seller, window_start AS starttime, window_end AS endtime, COUNT(*) AS auctions
      FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
      GROUP BY seller, window_start, window_end) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
WHERE A.auctions IS NULL OR A.auctions > 1;

CREATE MATERIALIZED VIEW quiet_auctions AS
SELECT id, seller, window_start
FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
WHERE (seller, window_start, window_end) NOT IN (
  SELECT id, window_start, window_end FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(date_time), INTERVAL '10' SECOND)));

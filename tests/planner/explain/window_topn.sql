-- Window Top-N over a window aggregate, and window deduplication (keep the last bid).
CREATE TABLE bids (
  auction BIGINT, bidder VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid');

CREATE MATERIALIZED VIEW top_auctions AS
SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rownum
  FROM (SELECT window_start, window_end, auction, SUM(price) AS price
        FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' MINUTES))
        GROUP BY window_start, window_end, auction)
) WHERE rownum <= 3;

CREATE MATERIALIZED VIEW last_bids AS
SELECT auction, bidder, price, date_time, window_start, window_end FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, auction ORDER BY date_time DESC) AS rownum
  FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' MINUTES))
) WHERE rownum = 1;

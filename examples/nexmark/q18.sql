-- Query 18: the last bid of each bidder on each auction.
-- Deduplication without a window, keeping the last row by event time: an updating
-- result (a changelog), whose rows are unique by (bidder, auction).

CREATE TABLE nexmark_q18 (
    auction  BIGINT,
    bidder  BIGINT,
    price  BIGINT,
    channel  VARCHAR,
    url  VARCHAR,
    `date_time`  TIMESTAMP(3),
    extra  VARCHAR
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q18
SELECT auction, bidder, price, channel, url, `date_time`, extra
 FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY bidder, auction ORDER BY `date_time` DESC) AS rank_number
       FROM bid)
 WHERE rank_number <= 1;

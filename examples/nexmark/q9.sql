-- Query 9: winning bids.
-- Each auction with its winning bid: the highest bid made while it was open (the
-- earliest of equal bids). A regular join, then a Top-1 per auction without a window:
-- an updating result, one row per auction id.

CREATE TABLE nexmark_q9 (
  id  BIGINT,
  item_name  VARCHAR,
  description  VARCHAR,
  initial_bid  BIGINT,
  reserve  BIGINT,
  `date_time`  TIMESTAMP(3),
  expires  TIMESTAMP(3),
  seller  BIGINT,
  category  BIGINT,
  extra  VARCHAR,
  auction  BIGINT,
  bidder  BIGINT,
  price  BIGINT,
  bid_date_time  TIMESTAMP(3),
  bid_extra  VARCHAR
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q9
SELECT
    id, item_name, description, initial_bid, reserve, `date_time`, expires, seller, category, extra,
    auction, bidder, price, bid_date_time, bid_extra
FROM (
   SELECT A.*, B.auction, B.bidder, B.price, B.`date_time` AS bid_date_time, B.extra AS bid_extra,
     ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.`date_time` ASC) AS rownum
   FROM auction A, bid B
   WHERE A.id = B.auction AND B.`date_time` BETWEEN A.`date_time` AND A.expires
)
WHERE rownum <= 1;

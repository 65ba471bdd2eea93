-- Query 20: expand bid with auction.
-- Every bid on an auction of category 10, with the auction's columns: a regular join
-- of two append-only streams, append-only itself.

CREATE TABLE nexmark_q20 (
    auction  BIGINT,
    bidder  BIGINT,
    price  BIGINT,
    channel  VARCHAR,
    url  VARCHAR,
    bid_date_time  TIMESTAMP(3),
    bid_extra  VARCHAR,

    item_name  VARCHAR,
    description  VARCHAR,
    initial_bid  BIGINT,
    reserve  BIGINT,
    auction_date_time  TIMESTAMP(3),
    expires  TIMESTAMP(3),
    seller  BIGINT,
    category  BIGINT,
    auction_extra  VARCHAR
) WITH (
    'connector' = 'blackhole'
);

INSERT INTO nexmark_q20
SELECT
    auction, bidder, price, channel, url, B.`date_time`, B.extra,
    item_name, description, initial_bid, reserve, A.`date_time`, expires, seller, category, A.extra
FROM
    bid AS B INNER JOIN auction AS A on B.auction = A.id
WHERE A.category = 10;

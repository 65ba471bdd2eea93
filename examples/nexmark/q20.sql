-- Query 20: expand bid with auction.
-- Each bid on an auction of category 10, with the auction's columns.
--
-- The suite joins bid and auction with a regular join on the auction id,
-- which keeps every auction and every bid forever. Here it is an interval
-- join: a bid meets its auction when it is made between one second before
-- and ten seconds after the auction (the generator references an auction
-- from the last hundred in flight, or one of the next ten: well within
-- that at its rates), so each row is dropped once the watermark is past the
-- last time it could match. tests/test_nexmark.py checks the result against
-- the suite's regular join.

CREATE TABLE nexmark_q20 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel VARCHAR,
  url VARCHAR,
  bid_date_time TIMESTAMP(3),
  bid_extra VARCHAR,
  item_name VARCHAR,
  description VARCHAR,
  initial_bid BIGINT,
  reserve BIGINT,
  auction_date_time TIMESTAMP(3),
  expires TIMESTAMP(3),
  seller BIGINT,
  category BIGINT,
  auction_extra VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q20
SELECT B.auction, B.bidder, B.price, B.channel, B.url, B.date_time, B.extra,
       A.item_name, A.description, A.initial_bid, A.reserve, A.date_time, A.expires, A.seller, A.category, A.extra
FROM bid AS B
JOIN auction AS A
ON B.auction = A.id
AND B.date_time BETWEEN A.date_time - INTERVAL '1' SECOND AND A.date_time + INTERVAL '10' SECOND
WHERE A.category = 10;

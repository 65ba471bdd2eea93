-- Regular joins of append-only streams: the result is append-only too, so it can go to a
-- csv sink. Nexmark q3's shape (ON and WHERE, each input filtered before the join), q4's
-- inner part (FROM a, b WHERE with a condition between the inputs), and an IN subquery.
CREATE TABLE auction (id BIGINT, seller BIGINT, category INT, ts TIMESTAMP(3), expires TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/auctions.csv', 'format' = 'csv');

CREATE TABLE person (id BIGINT, name VARCHAR, state VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/people.csv', 'format' = 'csv');

CREATE TABLE bid (auction BIGINT, bidder BIGINT, price INT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE sellers_out (name VARCHAR, state VARCHAR, id BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/sellers_out', 'format' = 'csv');

INSERT INTO sellers_out
SELECT P.name, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 3 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');

CREATE MATERIALIZED VIEW bids_in_time AS
SELECT A.id, A.category, B.bidder, B.price
FROM auction A, bid B
WHERE A.id = B.auction AND B.ts BETWEEN A.ts AND A.expires AND B.price > 100;

CREATE MATERIALIZED VIEW bids_of_sellers AS
SELECT auction, bidder, price FROM bid
WHERE bidder IN (SELECT seller FROM auction WHERE category = 1);

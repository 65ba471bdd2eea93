-- Regular joins whose results change: outer joins (a NULL-padded row is retracted when its
-- first match arrives), an anti join (a row leaves when a match arrives), and a join with an
-- updating input (the bid count per auction). Each view is kept as a multiset of rows.
CREATE TABLE auction (id BIGINT, seller BIGINT, category INT, ts TIMESTAMP(3), expires TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/auctions.csv', 'format' = 'csv');

CREATE TABLE person (id BIGINT, name VARCHAR, state VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/people.csv', 'format' = 'csv');

CREATE TABLE bid (auction BIGINT, bidder BIGINT, price INT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW auctions_and_sellers AS
SELECT A.id, A.category, P.name
FROM auction AS A LEFT JOIN person AS P ON A.seller = P.id AND P.state <> 'WA';

CREATE MATERIALIZED VIEW everyone AS
SELECT P.id AS person, A.id AS auction
FROM auction AS A FULL JOIN person AS P ON A.seller = P.id AND A.category = 2;

CREATE MATERIALIZED VIEW people_without_bids AS
SELECT id, name FROM person AS P
WHERE NOT EXISTS (SELECT * FROM bid AS B WHERE B.bidder = P.id AND B.price > 450);

CREATE MATERIALIZED VIEW bid_counts AS
SELECT A.id, A.category, C.bids
FROM auction AS A
JOIN (SELECT auction, COUNT(*) AS bids FROM bid GROUP BY auction) AS C ON A.id = C.auction;

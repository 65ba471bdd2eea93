CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

CREATE TABLE people (id BIGINT, name STRING, city STRING)
WITH ('connector' = 'filesystem', 'path' = '${DATA}/people.csv', 'format' = 'csv');
CREATE TABLE out1 (name STRING, city STRING, auction BIGINT, price BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/out1', 'format' = 'debezium-json');
INSERT INTO out1
SELECT p.name, p.city, b.auction, b.price
FROM bids AS b LEFT JOIN people AS p ON b.bidder = p.id
WHERE b.price > 100;

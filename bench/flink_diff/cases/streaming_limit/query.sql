CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

-- A streaming LIMIT keeps the first n rows to arrive; with ORDER BY it is a Top-N.
CREATE TABLE first3 (auction BIGINT, price BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/first3', 'format' = 'debezium-json');
CREATE TABLE top2 (auction BIGINT, price BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top2', 'format' = 'debezium-json');
INSERT INTO first3 SELECT auction, price FROM bids LIMIT 3;
INSERT INTO top2 SELECT auction, price FROM bids ORDER BY price DESC LIMIT 2;

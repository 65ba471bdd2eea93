CREATE TABLE auction (
  id BIGINT, item_name STRING, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/auction.csv', 'format' = 'csv');
CREATE TABLE bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/bids.csv', 'format' = 'csv');

-- Flink's official q4 text: AVG(final) of a BIGINT goes into the BIGINT column as it is.
CREATE TABLE nexmark_q4 (id BIGINT, final BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/nexmark_q4', 'format' = 'debezium-json');
INSERT INTO nexmark_q4
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;

-- An updating query into files: 'format' = 'debezium-json' writes each change as a
-- Debezium envelope ({"before", "after", "op"}); an append-only format would be refused.
-- HAVING makes auctions enter (op c) and leave (op d) the result.
CREATE TABLE bids (
  ts TIMESTAMP(3), channel VARCHAR, auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE auction_changes (auction BIGINT, n BIGINT, high BIGINT, mean DOUBLE)
WITH ('connector' = 'filesystem', 'path' = 'out/auction_changes', 'format' = 'debezium-json');

-- Auctions whose bids so far average under 23.5: auction 2 enters the result with its
-- third bid (23.33) and leaves it with its fourth (23.75).
INSERT INTO auction_changes
SELECT auction, COUNT(*), MAX(price), AVG(price)
FROM bids WHERE price IS NOT NULL
GROUP BY auction HAVING AVG(price) < 23.5;

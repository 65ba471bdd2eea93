-- GROUP BY without a window: an updating stream (retract), kept by upsert in a view
-- keyed by its GROUP BY keys and in a DuckDB table by its PRIMARY KEY; a GROUP BY over
-- it takes the retractions; a print sink and debezium-json files take the changes.
CREATE TABLE bids (auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'bids.csv', 'format' = 'csv');

CREATE TABLE channel_totals (channel VARCHAR, total BIGINT, PRIMARY KEY (channel) NOT ENFORCED)
WITH ('connector' = 'duckdb', 'path' = 'results.duckdb', 'table-name' = 'channel_totals');

CREATE TABLE changes (auction BIGINT, high BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/changes', 'format' = 'debezium-json');

CREATE TABLE shown (bids BIGINT) WITH ('connector' = 'print');

CREATE MATERIALIZED VIEW per_auction AS
SELECT auction, COUNT(*) AS n, MAX(price) AS high, COUNT(DISTINCT bidder) AS bidders
FROM bids WHERE price > 0 GROUP BY auction HAVING COUNT(*) > 1;

CREATE MATERIALIZED VIEW auctions_per_count AS
SELECT n, COUNT(*) AS auctions FROM (SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction) GROUP BY n;

INSERT INTO channel_totals SELECT UPPER(channel), SUM(price) FROM bids GROUP BY UPPER(channel);

INSERT INTO changes SELECT auction, MAX(price) FROM bids GROUP BY auction;

INSERT INTO shown SELECT COUNT(*) FROM bids;

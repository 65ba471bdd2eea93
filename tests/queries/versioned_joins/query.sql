-- Joins with a table as of a time. A lookup join (Nexmark q13's shape): each bid joined
-- with a csv side input as of its processing time. An event-time temporal join: each
-- order converted with the rate valid at the order's time (rates is a versioned table:
-- each row a new version of its currency); GBP has no rate, so its orders drop out of the
-- inner join and keep NULLs in the left join.
CREATE TABLE bid (auction BIGINT, price BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE side_input (key BIGINT, `value` VARCHAR)
WITH ('connector' = 'filesystem', 'path' = 'data/side.csv', 'format' = 'csv');

CREATE TABLE rates (currency VARCHAR, rate DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = 'data/rates.csv', 'format' = 'csv');

CREATE TABLE orders (id BIGINT, currency VARCHAR, amount BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = 'data/orders.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW side_joined AS
SELECT B.auction, B.price, B.ts, S.`value`
FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S ON MOD(B.auction, 10) = S.key;

CREATE MATERIALIZED VIEW converted AS
SELECT o.id, o.amount * r.rate AS converted, r.ts AS rate_time
FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;

CREATE MATERIALIZED VIEW converted_or_not AS
SELECT o.id, o.currency, r.rate
FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;

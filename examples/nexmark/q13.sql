-- Query 13: bounded side input join.
-- Each bid joined with a side input (a file of 10,000 keys) as of the bid's processing
-- time: a lookup join that reads side_input.csv once, when the job starts. Paths are
-- relative to where weir runs (the repository's root in the README's commands).

CREATE TABLE side_input (
  key BIGINT,
  `value` VARCHAR
) WITH (
  'connector' = 'filesystem',
  'path' = 'examples/nexmark/side_input.csv',
  'format' = 'csv'
);

CREATE TABLE nexmark_q13 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  date_time TIMESTAMP(3),
  `value` VARCHAR
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q13
SELECT B.auction, B.bidder, B.price, B.date_time, S.`value`
FROM (SELECT *, PROCTIME() AS p_time FROM bid) B
JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S
ON MOD(B.auction, 10000) = S.key;

-- A streaming LIMIT, as in Flink. Without ORDER BY: the first 3 rows that
-- arrive (here, in file order), append-only; the job reads on to the end of its
-- input. With ORDER BY: the top 2 of the whole stream, an updating result that
-- changes as a row sorting earlier arrives (cid's click at 2 s replaces ann's at 3 s,
-- then dan's at 0.5 s, arriving fifth, replaces cid's).
CREATE TABLE clicks (
  ts TIMESTAMP(3), user_name VARCHAR, url VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/clicks.csv', 'format' = 'csv');

CREATE TABLE first_clicks (ts TIMESTAMP(3), user_name VARCHAR)
WITH ('connector' = 'filesystem', 'path' = 'out/first_clicks', 'format' = 'csv');

INSERT INTO first_clicks SELECT ts, user_name FROM clicks WHERE url <> '/c' LIMIT 3;

CREATE MATERIALIZED VIEW earliest AS
SELECT ts, user_name FROM clicks ORDER BY ts LIMIT 2;

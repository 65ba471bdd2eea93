-- UNION ALL of two streams: user_id is INT on one side and BIGINT on the other (widened to BIGINT),
-- page and screen are both VARCHAR and take the first query's name. `ts` is a time attribute on both
-- sides, so it is one of the union (its watermark is the minimum of the inputs'), and the union can be
-- windowed, here in a common table expression and in a subquery in FROM.
CREATE TABLE web_clicks (
  ts TIMESTAMP(3), user_id INT, page VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/web_clicks.csv', 'format' = 'csv');

CREATE TABLE app_clicks (
  ts TIMESTAMP(3), user_id BIGINT, screen VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/app_clicks.csv', 'format' = 'csv');

CREATE TABLE all_clicks (channel VARCHAR, user_id BIGINT, place VARCHAR, ts TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = 'out/all_clicks', 'format' = 'csv');

INSERT INTO all_clicks
SELECT 'web', user_id, page, ts FROM web_clicks
UNION ALL
SELECT 'app', user_id, screen, ts FROM app_clicks WHERE screen <> 'home';

CREATE MATERIALIZED VIEW clicks_per_user_5min AS
WITH clicks AS (
  SELECT user_id, ts FROM web_clicks
  UNION ALL
  SELECT user_id, ts FROM app_clicks
)
SELECT window_start, window_end, user_id, COUNT(*) AS clicks
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' MINUTE))
GROUP BY window_start, window_end, user_id;

CREATE MATERIALIZED VIEW carts AS
SELECT u.who, u.ts FROM (
  SELECT t.who, t.ts FROM (
    SELECT CAST(user_id AS VARCHAR) || '@web' AS who, ts FROM web_clicks WHERE page = '/cart'
    UNION ALL
    SELECT CAST(user_id AS VARCHAR) || '@app' AS who, ts FROM app_clicks WHERE screen = 'cart'
  ) AS t
) AS u;

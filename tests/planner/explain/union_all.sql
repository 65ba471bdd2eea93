-- UNION ALL of three queries: user_id INT on one side, BIGINT on the others (the INT side is cast
-- before the union); ts is a time attribute on every side, so the union can be windowed.
CREATE TABLE web (ts TIMESTAMP(3), user_id INT, page VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE app (ts TIMESTAMP(3), user_id BIGINT, screen VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'nexmark', 'table' = 'bid');

CREATE MATERIALIZED VIEW clicks_per_minute AS
SELECT window_start, COUNT(*) AS clicks
FROM TABLE(TUMBLE(TABLE (
  SELECT user_id, ts FROM web
  UNION ALL SELECT user_id, ts FROM app
  UNION ALL SELECT user_id, ts FROM app WHERE screen = 'pay'), DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY window_start, window_end;

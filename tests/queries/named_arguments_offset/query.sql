-- The window table function with named arguments in another order and an
-- OFFSET: 10-second windows start at :03, :13, :23 ... so the first rows fall
-- into a window that began on the previous day. JSON lines in and out.
CREATE TABLE clicks (
  user_name VARCHAR, url VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/clicks.json', 'format' = 'json');

CREATE TABLE user_clicks (window_start TIMESTAMP(3), window_end TIMESTAMP(3), user_name VARCHAR, clicks BIGINT, pages BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/user_clicks', 'format' = 'json');

INSERT INTO user_clicks
SELECT window_start, window_end, user_name, COUNT(*), COUNT(DISTINCT url)
FROM TABLE(TUMBLE(
  TIMECOL => DESCRIPTOR(ts),
  DATA => TABLE clicks,
  OFFSET => INTERVAL '3' SECOND,
  SIZE => INTERVAL '10' SECOND))
GROUP BY window_start, window_end, user_name;

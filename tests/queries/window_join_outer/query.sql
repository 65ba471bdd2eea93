-- Window joins (Flink's example): both inputs windowed by the same 1-minute TUMBLE and
-- joined on window_start, window_end and num. NULL keys never match; outer joins keep them.
CREATE TABLE left_events (
  row_time TIMESTAMP(3), num INT, id VARCHAR,
  WATERMARK FOR row_time AS row_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/left_events.csv', 'format' = 'csv');

CREATE TABLE right_events (
  row_time TIMESTAMP(3), num INT, id VARCHAR,
  WATERMARK FOR row_time AS row_time - INTERVAL '2' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/right_events.csv', 'format' = 'csv');

CREATE MATERIALIZED VIEW full_joined AS
SELECT L.num AS l_num, L.id AS l_id, R.num AS r_num, R.id AS r_id,
       COALESCE(L.window_start, R.window_start) AS window_start, COALESCE(L.window_end, R.window_end) AS window_end
FROM (SELECT * FROM TABLE(TUMBLE(TABLE left_events, DESCRIPTOR(row_time), INTERVAL '1' MINUTES))) L
FULL JOIN (SELECT * FROM TABLE(TUMBLE(TABLE right_events, DESCRIPTOR(row_time), INTERVAL '1' MINUTES))) R
ON L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end;

CREATE MATERIALIZED VIEW left_joined AS
SELECT L.id AS l_id, R.id AS r_id, L.window_end
FROM TABLE(TUMBLE(TABLE left_events, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)) L
LEFT JOIN TABLE(TUMBLE(TABLE right_events, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)) R
ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.num = R.num;

CREATE MATERIALIZED VIEW inner_joined AS
SELECT L.num, L.id AS l_id, R.id AS r_id, CHAR_LENGTH(L.id) + CHAR_LENGTH(R.id) AS id_chars, L.window_start
FROM TABLE(TUMBLE(TABLE left_events, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)) L
JOIN TABLE(TUMBLE(TABLE right_events, DESCRIPTOR(row_time), INTERVAL '1' MINUTES)) R
ON L.num + 1 = R.num + 1 AND L.window_start = R.window_start AND L.window_end = R.window_end
WHERE R.row_time > L.row_time;

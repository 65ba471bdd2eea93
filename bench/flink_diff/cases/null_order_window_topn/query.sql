CREATE TABLE t (
  ts TIMESTAMP(3), k STRING, v INT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/t.json', 'format' = 'json');

-- The same NULL order in a window Top-N.
CREATE TABLE top_desc (window_start TIMESTAMP(3), k STRING, v INT, rn BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top_desc', 'format' = 'json');
CREATE TABLE top_asc (window_start TIMESTAMP(3), k STRING, v INT, rn BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top_asc', 'format' = 'json');
INSERT INTO top_desc
SELECT window_start, k, v, rn FROM (
  SELECT window_start, window_end, k, v, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY v DESC) AS rn
  FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn <= 2;
INSERT INTO top_asc
SELECT window_start, k, v, rn FROM (
  SELECT window_start, window_end, k, v, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY v ASC) AS rn
  FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn <= 2;

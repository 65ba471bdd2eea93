CREATE TABLE t (
  ts TIMESTAMP(3), k STRING, v INT, tag STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/t.csv', 'format' = 'csv');

-- Top-N: rows tied on ORDER BY rank in arrival order, the earlier first.
CREATE TABLE top2 (v INT, tag STRING, rn BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top2', 'format' = 'debezium-json');
CREATE TABLE win_top2 (window_start TIMESTAMP(3), v INT, tag STRING, rn BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/win_top2', 'format' = 'json');
INSERT INTO top2
SELECT v, tag, rn FROM (SELECT v, tag, ROW_NUMBER() OVER (ORDER BY v ASC) AS rn FROM t WHERE k = 'c') WHERE rn <= 2;
INSERT INTO win_top2
SELECT window_start, v, tag, rn FROM (
  SELECT window_start, window_end, v, tag, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC) AS rn
  FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn <= 3;

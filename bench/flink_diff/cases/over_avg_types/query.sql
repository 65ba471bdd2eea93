CREATE TABLE t (
  k STRING, ts TIMESTAMP(3), i INT, b BIGINT, m DECIMAL(10, 2), n DECIMAL(10, 6),
  WATERMARK FOR ts AS ts
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/t.csv', 'format' = 'csv');

-- OVER aggregates have the result types of every other aggregate in Flink: AVG(INT) is an INT
-- (truncated toward zero), AVG(BIGINT) a BIGINT, AVG(DECIMAL(10, 2)) a DECIMAL(38, 6) rounded
-- half up, SUM(DECIMAL(10, 2)) a DECIMAL(38, 2); a ROWS and a RANGE frame.
CREATE TABLE over_running (k STRING, ts TIMESTAMP(3), c BIGINT, ai INT, ab BIGINT, am_text STRING, an_text STRING,
                      sm_text STRING, sb BIGINT, mm_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/over_running', 'format' = 'json');
CREATE TABLE last2 (k STRING, ts TIMESTAMP(3), ai INT, ab BIGINT, am_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/last2', 'format' = 'json');
CREATE TABLE span (k STRING, ts TIMESTAMP(3), ai INT, am_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/span', 'format' = 'json');
INSERT INTO over_running
SELECT k, ts, COUNT(*) OVER w, AVG(i) OVER w, AVG(b) OVER w, CAST(AVG(m) OVER w AS STRING),
       CAST(AVG(n) OVER w AS STRING), CAST(SUM(m) OVER w AS STRING), SUM(b) OVER w, CAST(MIN(m) OVER w AS STRING)
FROM t WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW);
INSERT INTO last2
SELECT k, ts, AVG(i) OVER w, AVG(b) OVER w, CAST(AVG(m) OVER w AS STRING)
FROM t WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW);
INSERT INTO span
SELECT k, ts, AVG(i) OVER w, CAST(AVG(m) OVER w AS STRING)
FROM t WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW);

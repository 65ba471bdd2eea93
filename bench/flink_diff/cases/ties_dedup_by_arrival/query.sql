CREATE TABLE t (
  ts TIMESTAMP(3), k STRING, v INT, tag STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/t.csv', 'format' = 'csv');

-- Deduplication on the time attribute: of two rows with the same time, keep-last
-- (DESC) keeps the one that arrived last, keep-first (ASC) the one that arrived first.
CREATE TABLE keep_last (k STRING, v INT, tag STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/keep_last', 'format' = 'debezium-json');
CREATE TABLE keep_first (k STRING, v INT, tag STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/keep_first', 'format' = 'debezium-json');
INSERT INTO keep_last
SELECT k, v, tag FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM t) WHERE rn = 1;
INSERT INTO keep_first
SELECT k, v, tag FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC) AS rn FROM t) WHERE rn = 1;

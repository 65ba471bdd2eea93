CREATE TABLE t (
  ts TIMESTAMP(3), k STRING, v INT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/t.json', 'format' = 'json');

-- In Flink NULL is the smallest value: ORDER BY v DESC puts it last, ASC first.
CREATE TABLE top_desc (k STRING, v INT, rn BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top_desc', 'format' = 'debezium-json');
CREATE TABLE top_asc (k STRING, v INT, rn BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/top_asc', 'format' = 'debezium-json');
INSERT INTO top_desc
SELECT k, v, rn FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM t) WHERE rn <= 2;
INSERT INTO top_asc
SELECT k, v, rn FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v ASC) AS rn FROM t) WHERE rn <= 2;

CREATE TABLE s (
  ts TIMESTAMP(3), a STRING, b STRING, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/s.json', 'format' = 'json');

-- Java's case mapping: UPPER('straße') is 'STRASSE'.
CREATE TABLE cased (s STRING, up STRING, low STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/cased', 'format' = 'json');
INSERT INTO cased SELECT s, UPPER(s), LOWER(s) FROM s;

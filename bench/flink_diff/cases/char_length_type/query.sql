CREATE TABLE s (
  ts TIMESTAMP(3), a STRING, b STRING, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/s.json', 'format' = 'json');

-- CHAR_LENGTH counts characters and is INT.
CREATE TABLE lengths (a STRING, n INT, n_text STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/lengths', 'format' = 'json');
INSERT INTO lengths SELECT a, CHAR_LENGTH(a), CAST(CHAR_LENGTH(a) AS STRING) FROM s;

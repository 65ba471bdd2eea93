CREATE TABLE s (
  ts TIMESTAMP(3), a STRING, b STRING, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/s.json', 'format' = 'json');

-- CONCAT with a NULL argument is NULL; CONCAT_WS skips NULLs; || is NULL too.
CREATE TABLE joined (a STRING, b STRING, c STRING, ws STRING, pipes STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/joined', 'format' = 'json');
INSERT INTO joined SELECT a, b, CONCAT(a, '-', b), CONCAT_WS('-', a, b), a || b FROM s;

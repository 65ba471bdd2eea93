CREATE TABLE s (
  ts TIMESTAMP(3), a STRING, b STRING, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/s.json', 'format' = 'json');

-- EXTRACT(MILLISECOND ...) is the milliseconds within the second (2.050 s -> 50).
CREATE TABLE parts (ts TIMESTAMP(3), ms BIGINT, sec BIGINT, us BIGINT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/parts', 'format' = 'json');
INSERT INTO parts SELECT ts, EXTRACT(MILLISECOND FROM ts), EXTRACT(SECOND FROM ts), EXTRACT(MICROSECOND FROM ts) FROM s;

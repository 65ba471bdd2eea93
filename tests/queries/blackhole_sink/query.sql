-- A blackhole sink takes every row of its INSERT and keeps none: the job's
-- summary counts the rows it received, and only the csv sink writes files.
CREATE TABLE visits (
  ts TIMESTAMP(3), page VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/visits.csv', 'format' = 'csv');

CREATE TABLE discarded (window_start TIMESTAMP(3), window_end TIMESTAMP(3), page VARCHAR, visits BIGINT)
WITH ('connector' = 'blackhole');

CREATE TABLE popular (window_start TIMESTAMP(3), window_end TIMESTAMP(3), page VARCHAR, visits BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/popular', 'format' = 'csv');

INSERT INTO discarded
SELECT window_start, window_end, page, COUNT(*)
FROM TABLE(TUMBLE(TABLE visits, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, page;

INSERT INTO popular
SELECT window_start, window_end, page, COUNT(*)
FROM TABLE(TUMBLE(TABLE visits, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, page
HAVING COUNT(*) > 1;

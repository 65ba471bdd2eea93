CREATE TABLE s (
  ts TIMESTAMP(3), a STRING, b STRING, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/s.json', 'format' = 'json');

-- TIMESTAMPADD / TIMESTAMPDIFF over columns; the unit is a keyword, not a column.
CREATE TABLE shifted (ts TIMESTAMP(3), plus5 TIMESTAMP(3), plus_day TIMESTAMP(3), secs INT, mins INT, hours_back INT)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/shifted', 'format' = 'json');
INSERT INTO shifted
SELECT ts,
       TIMESTAMPADD(SECOND, 5, ts),
       TIMESTAMPADD(DAY, 1, ts),
       TIMESTAMPDIFF(SECOND, TIMESTAMP '2024-01-01 00:00:00', ts),
       TIMESTAMPDIFF(MINUTE, TIMESTAMP '2024-01-01 00:00:00', ts),
       TIMESTAMPDIFF(HOUR, ts, TIMESTAMP '2024-01-01 00:00:00')
FROM s;

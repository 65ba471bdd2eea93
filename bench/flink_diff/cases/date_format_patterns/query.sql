CREATE TABLE s (
  ts TIMESTAMP(3), a STRING, b STRING, s STRING,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = '${DATA}/s.json', 'format' = 'json');

-- DATE_FORMAT takes Java DateTimeFormatter patterns: quoted literals, MMM, MMMM, d, h, a, E, SSS.
CREATE TABLE formatted (ts TIMESTAMP(3), iso STRING, us_style STRING, long_style STRING, plain STRING)
WITH ('connector' = 'filesystem', 'path' = '${OUT}/formatted', 'format' = 'json');
INSERT INTO formatted
SELECT ts,
       DATE_FORMAT(ts, 'yyyy-MM-dd''T''HH:mm:ss'),
       DATE_FORMAT(ts, 'MMM d, h:mm a'),
       DATE_FORMAT(ts, 'EEEE, MMMM dd yyyy HH:mm:ss.SSS'),
       DATE_FORMAT(ts, 'yyyyMMdd HH')
FROM s;

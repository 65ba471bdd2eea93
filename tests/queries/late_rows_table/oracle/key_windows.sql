-- One row per batch: the watermark a row meets is the largest ts - 2 s of the
-- rows before it; the row is late if its window's end - 1 ms is not after that.
WITH events AS (
  SELECT *, row_number() OVER () AS position
  FROM read_csv('data/events.csv', header = true, columns = {'ts': 'TIMESTAMP', 'k': 'VARCHAR', 'v': 'BIGINT'})
), met AS (
  SELECT *, time_bucket(INTERVAL '10 seconds', ts) AS window_start,
         max(ts - INTERVAL '2 seconds') OVER (ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS watermark
  FROM events
)
SELECT k, window_start, window_start + INTERVAL '10 seconds' AS window_end, count(*) AS cnt, sum(v) AS total
FROM met
WHERE watermark IS NULL OR window_start + INTERVAL '10 seconds' - INTERVAL '1 millisecond' > watermark
GROUP BY ALL

-- Per row, whatever the batch size: a row meets the largest ts - 1 s of the rows before it,
-- and is late if its window's end - 1 ms is not after that.
WITH events AS (
  SELECT *, row_number() OVER () AS position
  FROM read_csv('data/events.csv', header = true, columns = {'ts': 'TIMESTAMP', 'k': 'VARCHAR'})
), met AS (
  SELECT *, max(ts - INTERVAL '1 second') OVER (ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS watermark
  FROM events
)
SELECT k, time_bucket(INTERVAL '10 seconds', ts) AS window_start,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end, count(*) AS cnt
FROM met
WHERE watermark IS NULL OR time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' - INTERVAL '1 millisecond' > watermark
GROUP BY ALL

-- Batches of three rows: a row meets the largest ts - 1 s of the earlier batches,
-- and is late if its window's end - 1 ms is not after that.
WITH events AS (
  SELECT *, (row_number() OVER () - 1) // 3 AS batch
  FROM read_csv('data/events.csv', header = true, columns = {'ts': 'TIMESTAMP', 'k': 'VARCHAR'})
), batches AS (
  SELECT batch, max(max(ts - INTERVAL '1 second')) OVER (ORDER BY batch ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS watermark
  FROM events GROUP BY batch
)
SELECT k, time_bucket(INTERVAL '10 seconds', ts) AS window_start,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end, count(*) AS cnt
FROM events JOIN batches USING (batch)
WHERE watermark IS NULL OR time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' - INTERVAL '1 millisecond' > watermark
GROUP BY ALL

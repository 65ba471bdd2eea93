-- One row per batch: the watermark a row meets is the largest ts - 2 s before it. A HOP row
-- counts in each of its two windows that had not fired (window_end - 1 ms > watermark).
WITH events AS (
  SELECT *, row_number() OVER () AS position
  FROM read_csv('data/events.csv', header = true, columns = {'ts': 'TIMESTAMP', 'k': 'VARCHAR', 'v': 'BIGINT'})
), met AS (
  SELECT *, time_bucket(INTERVAL '5 seconds', ts) - j * INTERVAL '5 seconds' AS window_start,
         max(ts - INTERVAL '2 seconds') OVER (ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS watermark
  FROM events, range(2) AS hops(j)
)
SELECT window_start, window_start + INTERVAL '10 seconds' AS window_end, k, sum(v) AS total
FROM met
WHERE watermark IS NULL OR window_start + INTERVAL '10 seconds' - INTERVAL '1 millisecond' > watermark
GROUP BY window_start, ROLLUP (k)

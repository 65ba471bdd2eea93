-- The rows each window dropped: every window of theirs had fired (its end - 1 ms was not after
-- the watermark the row met), with that watermark.
WITH events AS (
  SELECT *, row_number() OVER () AS position
  FROM read_csv('data/events.csv', header = true, columns = {'ts': 'TIMESTAMP', 'k': 'VARCHAR', 'v': 'BIGINT'})
), met AS (
  SELECT *, max(ts - INTERVAL '2 seconds') OVER (ORDER BY position ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS watermark
  FROM events
)
SELECT ts, k, v, 'key_windows.window_aggregate' AS weir_operator, watermark AS weir_watermark
FROM met WHERE time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' - INTERVAL '1 millisecond' <= watermark
UNION ALL
SELECT ts, k, v, 'hop_totals.window_aggregate', watermark
FROM met WHERE time_bucket(INTERVAL '5 seconds', ts) + INTERVAL '10 seconds' - INTERVAL '1 millisecond' <= watermark

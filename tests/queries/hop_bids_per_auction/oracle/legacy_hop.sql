WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
    columns = {'ts': 'TIMESTAMP', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})
), windows AS (
  SELECT *, time_bucket(INTERVAL '2 seconds', ts) - j * INTERVAL '2 seconds' AS window_start
  FROM bids, range(5) AS w(j)
)
SELECT auction, window_start, window_start + INTERVAL '10 seconds' AS window_end,
       count(*) FILTER (WHERE price > 50) AS big_bids
FROM windows
GROUP BY ALL

-- Every 10-second window starting at a multiple of 2 seconds that holds the row.
WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
    columns = {'ts': 'TIMESTAMP', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})
), windows AS (
  SELECT *, time_bucket(INTERVAL '2 seconds', ts) - j * INTERVAL '2 seconds' AS window_start
  FROM bids, range(5) AS w(j)
)
SELECT auction, window_start, window_start + INTERVAL '10 seconds' AS window_end,
       count(*) AS bids, sum(price) AS total, max(price) AS top, count(DISTINCT bidder) AS bidders
FROM windows
GROUP BY ALL
HAVING count(*) >= 2

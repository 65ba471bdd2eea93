-- Per 5-second window: the highest of the auctions' top prices, and how many auctions had bids.
WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
                         columns = {'ts': 'TIMESTAMP', 'auction': 'BIGINT', 'price': 'BIGINT'})),
tops AS (
  SELECT auction, time_bucket(INTERVAL '5 seconds', ts) AS window_start, max(price) AS top
  FROM bids GROUP BY ALL)
SELECT window_start, window_start + INTERVAL '5 seconds' AS window_end,
       window_start + INTERVAL '5 seconds' - INTERVAL '1 millisecond' AS window_time,
       max(top) AS top, count(*) AS auctions
FROM tops GROUP BY window_start

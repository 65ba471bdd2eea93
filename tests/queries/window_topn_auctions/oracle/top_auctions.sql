WITH totals AS (
  SELECT time_bucket(INTERVAL '10 seconds', date_time) AS window_start,
         time_bucket(INTERVAL '10 seconds', date_time) + INTERVAL '10 seconds' AS window_end,
         auction, sum(price)::BIGINT AS price
  FROM read_csv('data/bids.csv', header = true, columns = {'auction': 'BIGINT', 'bidder': 'VARCHAR', 'price': 'BIGINT', 'date_time': 'TIMESTAMP'})
  GROUP BY ALL
)
SELECT * FROM (
  SELECT *, row_number() OVER (PARTITION BY window_start, window_end
                               ORDER BY price DESC, window_start, window_end, auction) AS rownum
  FROM totals
) WHERE rownum <= 2

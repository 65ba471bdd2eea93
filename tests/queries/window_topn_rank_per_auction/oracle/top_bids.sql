SELECT window_start, window_end, auction, bidder, price FROM (
  SELECT *, time_bucket(INTERVAL '10 seconds', date_time) AS window_start,
         time_bucket(INTERVAL '10 seconds', date_time) + INTERVAL '10 seconds' AS window_end
  FROM read_csv('data/bids.csv', header = true, columns = {'auction': 'BIGINT', 'bidder': 'VARCHAR', 'price': 'BIGINT', 'date_time': 'TIMESTAMP'})
) QUALIFY rank() OVER (PARTITION BY window_start, window_end, auction ORDER BY price DESC) <= 2

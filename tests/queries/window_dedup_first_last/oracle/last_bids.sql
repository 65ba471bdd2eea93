SELECT bidder, auction, price, date_time, window_start FROM (
  SELECT *, time_bucket(INTERVAL '20 seconds', date_time) AS window_start
  FROM read_csv('data/bids.csv', header = true, columns = {'auction': 'BIGINT', 'bidder': 'VARCHAR', 'price': 'BIGINT', 'date_time': 'TIMESTAMP'})
) QUALIFY row_number() OVER (PARTITION BY window_start, bidder
                             ORDER BY date_time DESC, bidder, auction, price, date_time) = 1

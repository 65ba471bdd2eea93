SELECT auction, bidder, price, date_time, window_start, window_end FROM (
  SELECT *, time_bucket(INTERVAL '10 seconds', date_time) AS window_start,
         time_bucket(INTERVAL '10 seconds', date_time) + INTERVAL '10 seconds' AS window_end
  FROM read_csv('data/bids.csv', header = true, columns = {'auction': 'BIGINT', 'bidder': 'VARCHAR', 'price': 'BIGINT', 'date_time': 'TIMESTAMP'})
) QUALIFY row_number() OVER (PARTITION BY window_start, window_end, auction
                             ORDER BY date_time ASC, auction, bidder, price, date_time) = 1

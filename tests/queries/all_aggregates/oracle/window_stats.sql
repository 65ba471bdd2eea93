SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end,
       time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' - INTERVAL '1 millisecond' AS window_time,
       channel, count(*) AS n, count(bidder) AS bidders, count(DISTINCT bidder) AS distinct_bidders,
       sum(price) AS total, min(price) AS low, max(price) AS high, (sum(price) // count(price))::BIGINT AS mean, max(ts) AS last_ts
FROM read_csv('data/bids.csv', header = true,
              columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'bidder': 'BIGINT', 'price': 'BIGINT'})
GROUP BY ALL

-- Every window [period start, period start + k * 5 s), k = 1..3, that holds the row.
WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
    columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'bidder': 'BIGINT', 'price': 'BIGINT'})
), windows AS (
  SELECT *, time_bucket(INTERVAL '15 seconds', ts, TIMESTAMP '1970-01-01 00:00:02') AS window_start,
         time_bucket(INTERVAL '15 seconds', ts, TIMESTAMP '1970-01-01 00:00:02') + k * INTERVAL '5 seconds' AS window_end
  FROM bids, range(1, 4) AS w(k)
)
SELECT channel, window_start, window_end, window_end - INTERVAL '1 millisecond' AS window_time,
       count(*) AS bids, count(DISTINCT bidder) AS bidders, (sum(price) // count(price))::BIGINT AS mean,
       sum(price) FILTER (WHERE bidder IS NOT NULL) AS known_total
FROM windows
WHERE ts < window_end
GROUP BY ALL

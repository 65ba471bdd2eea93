-- Every 2 seconds, the auctions with the most bids in the 6 seconds before: a bid
-- is in the 3 windows starting at its 2-second slot and the 2 slots before it.
WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
                         columns = {'ts': 'TIMESTAMP', 'auction': 'BIGINT', 'price': 'BIGINT'})),
windowed AS (
  SELECT auction, time_bucket(INTERVAL '2 seconds', ts) - INTERVAL '2 seconds' * k AS starttime
  FROM bids, range(3) AS slides(k)),
counts AS (SELECT auction, starttime, count(*) AS num FROM windowed GROUP BY ALL)
SELECT auction, num, starttime, starttime + INTERVAL '6 seconds' AS endtime
FROM counts
WHERE num = (SELECT max(num) FROM counts AS c WHERE c.starttime = counts.starttime)

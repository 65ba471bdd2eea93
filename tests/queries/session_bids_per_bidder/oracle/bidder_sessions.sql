-- Gaps and islands per bidder: a new session where a bid is more than 3 s after the previous one.
WITH bids AS (
  SELECT * FROM read_csv('data/bids.csv', header = true,
    columns = {'ts': 'TIMESTAMP', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})
), flagged AS (
  SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY bidder ORDER BY ts) <= INTERVAL '3 seconds'
                 THEN 0 ELSE 1 END AS new_session
  FROM bids
), sessions AS (
  SELECT *, sum(new_session) OVER (PARTITION BY bidder ORDER BY ts ROWS UNBOUNDED PRECEDING) AS session
  FROM flagged
)
SELECT bidder, min(ts) AS window_start, max(ts) + INTERVAL '3 seconds' AS window_end,
       count(*) AS bids, sum(price) AS total, max(price) AS top, count(DISTINCT auction) AS auctions
FROM sessions
GROUP BY bidder, session
HAVING count(*) >= 2

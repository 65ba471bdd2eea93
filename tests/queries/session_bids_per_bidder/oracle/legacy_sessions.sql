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
SELECT bidder, min(ts) AS session_start, max(ts) + INTERVAL '3 seconds' AS session_end,
       max(ts) + INTERVAL '2999 milliseconds' AS rowtime,
       count(*) FILTER (WHERE price > 100) AS big_bids, (sum(price) // count(price))::BIGINT AS mean_price
FROM sessions
GROUP BY bidder, session

SELECT auction, count(*) AS n, count(bidder) AS bidders, count(DISTINCT bidder) AS distinct_bidders,
       sum(price) AS total, min(price) AS low, max(price) AS high, (sum(price) // count(price))::BIGINT AS mean,
       count(*) FILTER (WHERE price > 10) AS big_bids, max(ts) AS last_ts
FROM read_csv('data/bids.csv', header = true, columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})
GROUP BY auction

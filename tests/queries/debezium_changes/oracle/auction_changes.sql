SELECT auction, count(*) AS n, max(price) AS high, (sum(price) // count(price))::BIGINT AS mean
FROM read_csv('data/bids.csv', header = true,
              columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})
WHERE price IS NOT NULL
GROUP BY auction HAVING (sum(price) // count(price))::BIGINT < 23.5

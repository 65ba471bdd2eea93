SELECT channel, count(*) AS n, sum(price) AS total
FROM read_csv('data/bids.csv', header = true, columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})
WHERE price IS NOT NULL GROUP BY channel HAVING count(*) >= 3

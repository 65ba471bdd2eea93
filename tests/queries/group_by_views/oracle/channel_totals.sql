SELECT channel, count(*) AS bids, sum(price) AS total
FROM read_csv('data/bids.csv', header = true, columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})
GROUP BY channel

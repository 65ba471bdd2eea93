SELECT DISTINCT channel, price > 10 AS big
FROM read_csv('data/bids.csv', header = true, columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})

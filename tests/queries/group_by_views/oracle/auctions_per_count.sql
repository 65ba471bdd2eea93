SELECT n, count(*) AS auctions, max(auction) AS max_auction
FROM (SELECT auction, count(*) AS n FROM read_csv('data/bids.csv', header = true, columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'}) GROUP BY auction)
GROUP BY n

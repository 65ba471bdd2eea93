SELECT auction, bidder, price FROM read_csv('data/bids.csv', header = true)
WHERE bidder IN (SELECT seller FROM read_csv('data/auctions.csv', header = true) WHERE category = 1)

SELECT A.id, A.category, B.bidder, B.price
FROM read_csv('data/auctions.csv', header = true) A, read_csv('data/bids.csv', header = true) B
WHERE A.id = B.auction AND B.ts BETWEEN A.ts AND A.expires AND B.price > 100

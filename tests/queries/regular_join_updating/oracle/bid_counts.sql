SELECT A.id, A.category, C.bids
FROM read_csv('data/auctions.csv', header = true) A
JOIN (SELECT auction, COUNT(*) AS bids FROM read_csv('data/bids.csv', header = true) GROUP BY auction) C ON A.id = C.auction

SELECT auction, bidder, price FROM (SELECT *, row_number() OVER (PARTITION BY auction ORDER BY ts DESC, bidder, price) AS rn FROM read_csv('data/bids.csv', header = true))
WHERE rn = 1

SELECT auction, bidder, ts FROM (SELECT *, row_number() OVER (PARTITION BY auction ORDER BY ts, bidder, price) AS rn FROM read_csv('data/bids.csv', header = true))
WHERE rn = 1

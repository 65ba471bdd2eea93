SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY auction ORDER BY price DESC, bidder, ts) AS rn FROM read_csv('data/bids.csv', header = true))
WHERE rn <= 3

SELECT B.auction, B.price, B.ts, S.value
FROM read_csv('data/bids.csv', header = true) B JOIN read_csv('data/side.csv', header = true) S ON B.auction % 10 = S.key

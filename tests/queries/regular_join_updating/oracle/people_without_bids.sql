SELECT id, name FROM read_csv('data/people.csv', header = true) P
WHERE NOT EXISTS (SELECT * FROM read_csv('data/bids.csv', header = true) B WHERE B.bidder = P.id AND B.price > 450)

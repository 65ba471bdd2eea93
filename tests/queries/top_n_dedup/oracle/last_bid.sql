-- Flink: NULLs are the smallest value; rows tied on ORDER BY rank by arrival (the file's order),
-- keep-last deduplication keeping the later of two rows with the same time.
SELECT auction, bidder, price FROM (SELECT *, row_number() OVER (PARTITION BY auction ORDER BY ts DESC NULLS LAST, arrival DESC) AS rn FROM (SELECT *, row_number() OVER () AS arrival FROM read_csv('data/bids.csv', header = true)))
WHERE rn = 1

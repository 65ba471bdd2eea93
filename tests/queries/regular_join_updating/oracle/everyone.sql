SELECT P.id AS person, A.id AS auction
FROM read_csv('data/auctions.csv', header = true) A FULL JOIN read_csv('data/people.csv', header = true) P
ON A.seller = P.id AND A.category = 2

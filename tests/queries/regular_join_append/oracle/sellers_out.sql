SELECT P.name, P.state, A.id
FROM read_csv('data/auctions.csv', header = true) A JOIN read_csv('data/people.csv', header = true) P ON A.seller = P.id
WHERE A.category = 3 AND P.state IN ('OR', 'ID', 'CA')

SELECT A.id, A.category, P.name
FROM read_csv('data/auctions.csv', header = true) A LEFT JOIN read_csv('data/people.csv', header = true) P
ON A.seller = P.id AND P.state <> 'WA'

SELECT bidder, n, rk FROM (SELECT *, rank() OVER (ORDER BY n DESC) AS rk FROM (SELECT bidder, count(*) AS n FROM read_csv('data/bids.csv', header = true) GROUP BY bidder))
WHERE rk <= 3

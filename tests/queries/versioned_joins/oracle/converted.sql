SELECT o.id, o.amount * r.rate AS converted, r.ts AS rate_time
FROM read_csv('data/orders.csv', header = true) o
ASOF JOIN read_csv('data/rates.csv', header = true, columns = {'currency': 'VARCHAR', 'rate': 'DOUBLE', 'ts': 'TIMESTAMP'}) r
ON o.currency = r.currency AND o.ts >= r.ts

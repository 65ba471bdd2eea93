SELECT o.id, o.currency, r.rate
FROM read_csv('data/orders.csv', header = true) o
ASOF LEFT JOIN read_csv('data/rates.csv', header = true, columns = {'currency': 'VARCHAR', 'rate': 'DOUBLE', 'ts': 'TIMESTAMP'}) r
ON o.currency = r.currency AND o.ts >= r.ts

SELECT o.id, o.amount * 2 * r.rate AS converted
FROM read_csv('data/orders.csv', header = true,
              columns = {'id': 'BIGINT', 'amount': 'INT', 'cur': 'VARCHAR', 'ordered_at': 'VARCHAR'}) AS o
JOIN read_csv('data/rates.csv', header = true, columns = {'cur': 'VARCHAR', 'rate': 'INT'}) AS r
  ON o.cur = r.cur

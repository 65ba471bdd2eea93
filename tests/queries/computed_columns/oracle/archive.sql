SELECT id, amount
FROM read_csv('data/orders.csv', header = true,
              columns = {'id': 'BIGINT', 'amount': 'INT', 'cur': 'VARCHAR', 'ordered_at': 'VARCHAR'})

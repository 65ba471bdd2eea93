WITH payments AS (
  SELECT *, time_bucket(INTERVAL '1 minute', ts) AS window_start
  FROM read_csv('data/payments.csv', header = true,
                columns = {'ts': 'TIMESTAMP', 'user_name': 'VARCHAR', 'amount': 'BIGINT', 'note': 'VARCHAR'})
)
SELECT format('alerts> +I[{}, {}, {}, {}, {}]', strftime(window_start, '%Y-%m-%d %H:%M:%S'),
              strftime(window_start + INTERVAL '1 minute', '%Y-%m-%d %H:%M:%S'), user_name, amount, coalesce(note, 'null'))
FROM payments WHERE amount > 100
UNION ALL
SELECT format('averages> +I[{}, {}, {}, {}, {}]', strftime(window_start, '%Y-%m-%d %H:%M:%S'), user_name,
              count(*), (sum(amount) // count(amount))::DOUBLE::VARCHAR, coalesce(max(note), 'null'))
FROM payments GROUP BY window_start, user_name
UNION ALL
SELECT format('+I[{}, {}, {}]', user_name, amount, strftime(ts, '%Y-%m-%d %H:%M:%S'))
FROM payments WHERE amount < 50

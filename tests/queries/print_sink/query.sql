-- Two print sinks, each line prefixed by its 'print-identifier': windowed rows
-- without aggregation (window_start and window_end per row, filtered), and an
-- aggregate with a DOUBLE average and NULL notes (printed as null); and a
-- bare SELECT, printed without a prefix.
CREATE TABLE payments (
  ts TIMESTAMP(3), user_name VARCHAR, amount BIGINT, note VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/payments.csv', 'format' = 'csv');

CREATE TABLE alerts (window_start TIMESTAMP(3), window_end TIMESTAMP(3), user_name VARCHAR, amount BIGINT, note VARCHAR)
WITH ('connector' = 'print', 'print-identifier' = 'alerts');

CREATE TABLE averages (window_start TIMESTAMP(3), user_name VARCHAR, payments BIGINT, avg_amount DOUBLE, top_note VARCHAR)
WITH ('connector' = 'print', 'print-identifier' = 'averages');

INSERT INTO alerts
SELECT window_start, window_end, user_name, amount, note
FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
WHERE amount > 100;

INSERT INTO averages
SELECT window_start, user_name, COUNT(*), AVG(amount), MAX(note)
FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY window_start, window_end, user_name;

-- A bare SELECT in a job prints its rows without a prefix.
SELECT user_name, amount, ts FROM payments WHERE amount < 50;

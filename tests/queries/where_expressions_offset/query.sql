-- WHERE, GROUP BY expressions and expressions over aggregates, over
-- one-minute windows shifted by a positional offset of 15 seconds.
CREATE TABLE trades (
  ts TIMESTAMP(3), symbol VARCHAR, qty BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '10' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/trades.csv', 'format' = 'csv');

CREATE TABLE symbol_minutes (
  window_start TIMESTAMP(3), window_end TIMESTAMP(3), symbol VARCHAR, size_class VARCHAR,
  trades BIGINT, total_qty BIGINT, notional BIGINT, price_range BIGINT
) WITH ('connector' = 'filesystem', 'path' = 'out/symbol_minutes', 'format' = 'csv');

INSERT INTO symbol_minutes
SELECT window_start, window_end, upper(symbol) AS symbol,
       CASE WHEN qty >= 100 THEN 'block' ELSE 'retail' END AS size_class,
       COUNT(*), SUM(qty), SUM(qty * price), MAX(price) - MIN(price)
FROM TABLE(TUMBLE(TABLE trades, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '15' SECOND))
WHERE qty > 0 AND symbol <> 'test'
GROUP BY window_start, window_end, upper(symbol), CASE WHEN qty >= 100 THEN 'block' ELSE 'retail' END;

-- Per batch of 2 rows (in file order), each channel the batch touches: its count
-- before the batch and after it; +I when it had none, else -U old and +U new.
WITH rows AS (
  SELECT channel, (row_number() OVER () - 1) // 2 AS batch
  FROM read_csv('data/bids.csv', header = true,
                columns = {'ts': 'TIMESTAMP', 'channel': 'VARCHAR', 'auction': 'BIGINT', 'bidder': 'BIGINT', 'price': 'BIGINT'})),
touched AS (SELECT DISTINCT batch, channel FROM rows),
counts AS (
  SELECT t.channel, coalesce(t.channel, 'null') AS shown,
         (SELECT count(*) FROM rows r WHERE r.channel IS NOT DISTINCT FROM t.channel AND r.batch < t.batch) AS before,
         (SELECT count(*) FROM rows r WHERE r.channel IS NOT DISTINCT FROM t.channel AND r.batch <= t.batch) AS after
  FROM touched t)
SELECT 'channels> +I[' || shown || ', ' || after || ']' FROM counts WHERE before = 0
UNION ALL SELECT 'channels> -U[' || shown || ', ' || before || ']' FROM counts WHERE before > 0
UNION ALL SELECT 'channels> +U[' || shown || ', ' || after || ']' FROM counts WHERE before > 0

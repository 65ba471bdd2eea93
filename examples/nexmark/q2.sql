-- Query 2: selection.
-- The bids on every 123rd auction (Nexmark's original picks five fixed
-- auction ids, which match almost nothing on a long stream).

CREATE TABLE nexmark_q2 (
  auction  BIGINT,
  price  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q2
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;

-- Query 3: local item suggestion.
-- Who is selling in category 10 in Oregon, Idaho or California: a regular join of
-- auctions with their sellers. Both inputs are append-only, so is the result; each
-- input is filtered before the join, and the join keeps every person and every
-- auction of category 10 (set 'table.exec.state.ttl' to bound that state).

CREATE TABLE nexmark_q3 (
  name  VARCHAR,
  city  VARCHAR,
  state  VARCHAR,
  id  BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q3
SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P on A.seller = P.id
WHERE
    A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');

-- Query 4: average price for a category.
-- The winning bid of each auction (its highest bid while it was open), averaged per
-- category: a regular join, a GROUP BY without a window, and a GROUP BY over that
-- updating result (an updating result itself). AVG of a BIGINT is a BIGINT, truncated,
-- as in Flink.

CREATE TABLE nexmark_q4 (
  id BIGINT,
  final BIGINT
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q4
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.`date_time` BETWEEN A.`date_time` AND A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;

-- Query 5: hot items.
-- Which auctions have seen the most bids in the last period? Every 2 seconds,
-- the auctions with the most bids in the last 10 seconds (all of them on a tie).
--
-- The suite joins the bid counts with their maximum per window; ranking the
-- counts within each window (a window Top-N, RANK keeps ties) gives the same rows.

CREATE TABLE nexmark_q5 (
  auction BIGINT,
  num BIGINT,
  starttime TIMESTAMP(3),
  endtime TIMESTAMP(3)
) WITH ('connector' = 'blackhole');

INSERT INTO nexmark_q5
SELECT auction, num, window_start, window_end
FROM (
  SELECT auction, num, window_start, window_end,
         RANK() OVER (PARTITION BY window_start, window_end ORDER BY num DESC) AS rownum
  FROM (
    SELECT auction, COUNT(*) AS num, window_start, window_end
    FROM TABLE(HOP(TABLE bid, DESCRIPTOR(date_time), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end
  )
)
WHERE rownum <= 1;

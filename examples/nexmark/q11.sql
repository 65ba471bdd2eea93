-- Query 11: user sessions.
-- How many bids did a user make in each session they were active? A bidder's
-- session ends when they make no bid for 10 seconds.

CREATE TABLE nexmark_q11 (
  bidder BIGINT,
  bid_count BIGINT,
  starttime TIMESTAMP(3),
  endtime TIMESTAMP(3)
) WITH (
  'connector' = 'blackhole'
);

INSERT INTO nexmark_q11
SELECT
    B.bidder,
    count(*) as bid_count,
    SESSION_START(B.`date_time`, INTERVAL '10' SECOND) as starttime,
    SESSION_END(B.`date_time`, INTERVAL '10' SECOND) as endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.`date_time`, INTERVAL '10' SECOND);

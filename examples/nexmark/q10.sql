-- Query 10: log to a file system.
-- Every bid with its day and minute, written as csv part files under
-- out/nexmark_q10. (The suite's sink is PARTITIONED BY (dt, hm), one
-- directory per minute; weir's filesystem sink does not partition yet, so the
-- day and minute are columns of every file.)

CREATE TABLE nexmark_q10 (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  date_time TIMESTAMP(3),
  extra VARCHAR,
  dt VARCHAR,
  hm VARCHAR
) WITH ('connector' = 'filesystem', 'path' = 'out/nexmark_q10', 'format' = 'csv');

INSERT INTO nexmark_q10
SELECT auction, bidder, price, date_time, extra,
       DATE_FORMAT(date_time, 'yyyy-MM-dd'), DATE_FORMAT(date_time, 'HH:mm')
FROM bid;

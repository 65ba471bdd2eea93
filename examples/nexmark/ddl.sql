-- The Nexmark tables over weir's built-in generator (connector 'nexmark').
--
-- The Flink suite reads one interleaved stream of events and splits it into
-- the views person, auction and bid. Weir's connector does the split itself:
-- 'table' = 'person' | 'auction' | 'bid' reads only the events of that kind,
-- with the event numbers and timestamps they have in the interleaved stream
-- (2% persons, 6% auctions, 92% bids). The three tables below, declared with
-- the same 'events', 'first-event.rate' and 'seed', are therefore the three
-- parts of one stream of 'events' events.
--
-- 'events' counts events of all kinds; 'first-event.rate' is events per
-- event-time second: 1,000,000 events at 10,000 per second cover 100 seconds
-- of event time, so that 10-second windows fire ten times.
-- Run a query:  cat examples/nexmark/ddl.sql examples/nexmark/q5.sql > q5-job.sql && weir run q5-job.sql

CREATE TABLE person (
  id BIGINT,
  name VARCHAR,
  email_address VARCHAR,
  credit_card VARCHAR,
  city VARCHAR,
  state VARCHAR,
  date_time TIMESTAMP(3),
  extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  'connector' = 'nexmark',
  'table' = 'person',
  'events' = '1000000',
  'first-event.rate' = '10000'
);

CREATE TABLE auction (
  id BIGINT,
  item_name VARCHAR,
  description VARCHAR,
  initial_bid BIGINT,
  reserve BIGINT,
  date_time TIMESTAMP(3),
  expires TIMESTAMP(3),
  seller BIGINT,
  category BIGINT,
  extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  'connector' = 'nexmark',
  'table' = 'auction',
  'events' = '1000000',
  'first-event.rate' = '10000'
);

CREATE TABLE bid (
  auction BIGINT,
  bidder BIGINT,
  price BIGINT,
  channel VARCHAR,
  url VARCHAR,
  date_time TIMESTAMP(3),
  extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (
  'connector' = 'nexmark',
  'table' = 'bid',
  'events' = '1000000',
  'first-event.rate' = '10000'
);

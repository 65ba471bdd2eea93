-- A print sink shows each change's kind, as Flink's print connector does: +I for a
-- new key, -U then +U when its count changes, per batch of 2 source rows (a
-- batch is the operator's mini-batch: a key changed twice in one batch updates once).
SET 'weir.source.batch-size' = '2';

CREATE TABLE bids (
  ts TIMESTAMP(3), channel VARCHAR, auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/bids.csv', 'format' = 'csv');

CREATE TABLE channel_counts (channel VARCHAR, n BIGINT)
WITH ('connector' = 'print', 'print-identifier' = 'channels');

INSERT INTO channel_counts SELECT channel, COUNT(*) FROM bids GROUP BY channel;

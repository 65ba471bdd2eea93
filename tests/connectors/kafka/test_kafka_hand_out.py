"""The Kafka source hands a poll's messages to its partitions' buffers by runs of one partition
(``KafkaSource._hand_out``): whatever the mix of topics, partitions, unassigned partitions and
partition ends in a poll, each buffer gets its messages in order and a partition is at its end
exactly when its last event in the poll was its end, as a message-by-message loop decides.
No broker: librdkafka's ``Message`` objects are built by hand."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

kafka = pytest.importorskip("confluent_kafka")

from weir.engine.connectors.kafka import _EOF, _Partition  # noqa: E402
from weir.engine.connectors.registry import create_source  # noqa: E402
from weir.engine.errors import SourceError  # noqa: E402

SCHEMA = pa.schema([("v", pa.int64())])
ASSIGNED = ["a:0", "a:1", "b:0"]
EVENTS = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 2), st.booleans()), max_size=60)


def source():
    made = create_source({"connector": "kafka", "topic": "a;b", "format": "json",
                          "properties.bootstrap.servers": "127.0.0.1:9"}, SCHEMA)
    made._partitions = {split: _Partition(*split.split(":")) for split in ASSIGNED}
    return made


def messages(events: list[tuple[str, int, bool]]) -> list:
    """(topic, partition, is the partition's end) as librdkafka's messages, offsets counting up."""
    return [kafka.Message(topic=topic, partition=partition, error=kafka.KafkaError(_EOF)) if end
            else kafka.Message(topic=topic, partition=partition, offset=i, value=b"{}")
            for i, (topic, partition, end) in enumerate(events)]


def one_by_one(polled: list) -> dict[str, tuple[list[int], bool]]:
    """The reference: each message in turn to its split's buffer, an end marks its split."""
    found = {split: ([], False) for split in ASSIGNED}
    for message in polled:
        split = f"{message.topic()}:{message.partition()}"
        if split not in found:
            continue
        offsets, _ = found[split]
        found[split] = (offsets, True) if message.error() is not None else (offsets + [message.offset()], False)
    return found


@settings(max_examples=200, deadline=None)
@given(polls=st.lists(EVENTS, min_size=1, max_size=3))
def test_runs_give_each_partition_what_a_message_by_message_loop_gives(polls):
    reader = source()
    for events in polls:
        polled = messages(events)
        before = {s: (list(p.buffer), p.at_end) for s, p in reader._partitions.items()}
        reader._hand_out(polled)
        expected = one_by_one(polled)
        for split, part in reader._partitions.items():
            offsets, ended = expected[split]
            got = [m.offset() for m in part.buffer[len(before[split][0]):]]
            assert got == offsets
            touched = any(f"{m.topic()}:{m.partition()}" == split for m in polled)
            assert part.at_end == (ended if touched else before[split][1])


def test_a_fatal_error_in_a_poll_is_raised_naming_it():
    reader = source()
    error = kafka.KafkaError(kafka.KafkaError._ALL_BROKERS_DOWN, fatal=True)
    with pytest.raises(SourceError, match="Kafka:"):
        reader._hand_out([kafka.Message(topic="a", partition=0, offset=0, value=b"{}"),
                          kafka.Message(topic="a", partition=0, error=error)])

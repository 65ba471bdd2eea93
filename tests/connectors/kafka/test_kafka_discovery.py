"""Topics and partitions that appear while a Kafka source runs are read from their start
('scan.topic-partition-discovery.interval'), divided among workers by partition number and
kept in the checkpointed offsets; a completed checkpoint's offsets are committed to
'properties.group.id', where 'group-offsets' starts a new job.

tansu refuses CreatePartitions (KIP-195), so a new topic matching 'topic-pattern' stands for
a new partition: both are a split the re-listing did not list before (one code path)."""
from __future__ import annotations

import json
import time
import uuid

import pyarrow as pa
import pytest

from weir.engine.connectors.kafka import KafkaSource
from weir.engine.connectors.registry import create_source
from weir.engine.runtime.source_reader import SourceReader

SCHEMA = pa.schema([("v", pa.int64())])


def rows(values) -> list[bytes]:
    return [json.dumps({"v": v}).encode() for v in values]


def pattern_source(broker, prefix: str, **options: str):
    base = {"connector": "kafka", "topic-pattern": f"{prefix}.*", "properties.bootstrap.servers": broker.bootstrap,
            "scan.startup.mode": "latest-offset", "format": "json",
            "scan.topic-partition-discovery.interval": "100ms"}
    return create_source({**base, **options}, SCHEMA, batch_size=5)


def collect(steps, n: int, limit: float = 60.0) -> list[int]:
    """Step readers (iterators) round-robin until they have yielded ``n`` values in all."""
    found: list[list[int]] = [[] for _ in steps]
    deadline = time.monotonic() + limit
    while sum(map(len, found)) < n:
        if time.monotonic() > deadline:
            pytest.fail(f"read {found}, expected {n} values")
        for i, it in enumerate(steps):
            batch, _ = next(it)
            if batch is not None:
                found[i] += batch.column("v").to_pylist()
    return found


def test_a_topic_that_appears_is_read_from_its_start_and_kept_across_a_restart(broker):
    prefix = f"disc-{uuid.uuid4().hex[:8]}-"
    first = broker.create_topic(prefix + "a")
    reader = SourceReader(pattern_source(broker, prefix), None)  # lists only the first topic
    second = broker.create_topic(prefix + "b")
    broker.produce(second, rows([100, 101]), partition=0)  # before it is discovered
    steps = iter(reader)
    next(steps)  # the first topic is now assigned, at its end ('latest-offset')
    broker.produce(first, rows([1, 2]), partition=0)
    # The new topic is read from its start (earliest, as in Flink), not from 'latest-offset'.
    assert sorted(collect([steps], 4)[0]) == [1, 2, 100, 101]
    position = reader.position()
    assert position["offsets"] == {f"{first}:0": 2, f"{second}:0": 2}
    # A restart lists both and resumes each where the checkpoint left it.
    broker.produce(first, rows([3]), partition=0)
    broker.produce(second, rows([102]), partition=0)
    restarted = SourceReader(pattern_source(broker, prefix), None)
    restarted.restore(position)
    assert sorted(collect([iter(restarted)], 2)[0]) == [3, 102]


def test_a_topic_that_appeared_after_the_checkpoint_is_read_from_its_start_on_restore(broker):
    prefix = f"disc-{uuid.uuid4().hex[:8]}-"
    first = broker.create_topic(prefix + "a")
    reader = SourceReader(pattern_source(broker, prefix), None)
    next(iter(reader))
    position = reader.position()  # the job dies before it discovers the next topic
    assert position["listed"] == [f"{first}:0"]
    second = broker.create_topic(prefix + "b")
    broker.produce(second, rows([7, 8]), partition=0)
    restarted = SourceReader(pattern_source(broker, prefix), None)  # lists both at its start
    restarted.restore(position)
    # Not by 'latest-offset' (which would skip 7 and 8): it is new to the checkpoint, as in Flink.
    assert sorted(collect([iter(restarted)], 2)[0]) == [7, 8]


def test_partitions_go_round_robin_from_a_subtask_the_topics_hash_picks_as_in_flink():
    """Flink's KafkaSourceEnumerator.getSplitOwner: partition 0 of a topic goes to subtask
    ((topic.hashCode() * 31) & 0x7FFFFFFF) % N, the next ones round-robin. The values were
    computed with Java (jshell): "abc".hashCode() is 96354, "orders" overflows to -1008770331."""
    owner = KafkaSource.owner
    assert [owner(None, f"abc:{p}", 4) for p in range(4)] == [2, 3, 0, 1]  # 96354 * 31 % 4 = 2
    assert [owner(None, f"orders:{p}", 3) for p in range(4)] == [0, 1, 2, 0]  # jshell: start 0
    assert owner(None, "a:b:1", 2) == 1 - owner(None, "a:b:0", 2)  # the partition follows the last colon


def test_workers_divide_discovered_partitions_by_partition_number(broker):
    prefix = f"disc-{uuid.uuid4().hex[:8]}-"
    broker.create_topic(prefix + "a")
    readers = [SourceReader(pattern_source(broker, prefix, **{"scan.startup.mode": "earliest-offset"}), None,
                            subtask=i, parallelism=2) for i in range(2)]
    steps = [iter(r) for r in readers]
    new = broker.create_topic(prefix + "b", partitions=2)
    broker.produce(new, rows([10, 11]), partition=0)
    broker.produce(new, rows([20, 21, 22]), partition=1)
    found = collect(steps, 5)
    first = readers[0].source.owner(f"{new}:0", 2)  # then partition 1 on the other subtask
    assert sorted(found[first]) == [10, 11] and sorted(found[1 - first]) == [20, 21, 22]
    assert f"{new}:0" in readers[first].splits and f"{new}:1" in readers[1 - first].splits


def test_discovery_is_off_for_a_bounded_source_and_for_interval_zero(broker):
    topic = broker.create_topic()
    common = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": broker.bootstrap,
              "format": "json"}
    assert create_source(common, SCHEMA).discovery_interval == 300  # Flink's default: 5 minutes
    assert create_source({**common, "scan.bounded.mode": "latest-offset"}, SCHEMA).discovery_interval is None
    assert create_source({**common, "scan.topic-partition-discovery.interval": "0"}, SCHEMA).discovery_interval is None


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_completed_checkpoint_commits_its_offsets_to_the_group_where_group_offsets_start(broker, in_tmp,
                                                                                          parallelism):
    import weir
    from confluent_kafka import Consumer, TopicPartition
    topic = broker.create_topic(partitions=2)
    broker.produce(topic, rows(range(5)), partition=0)
    broker.produce(topic, rows(range(100, 103)), partition=1)
    group = f"g-{topic}"

    def script(mode: str, view: str) -> str:
        return f"""
        SET 'execution.checkpointing.interval' = '100ms';
        SET 'parallelism.default' = '{parallelism}';
        CREATE TABLE e (v BIGINT) WITH ('connector' = 'kafka', 'topic' = '{topic}',
          'properties.bootstrap.servers' = '{broker.bootstrap}', 'properties.group.id' = '{group}',
          'scan.startup.mode' = '{mode}', 'scan.bounded.mode' = 'latest-offset', 'format' = 'json');
        CREATE MATERIALIZED VIEW {view} AS SELECT v FROM e;
        """

    weir.run(script("earliest-offset", "first"), db="r.duckdb", name="first")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    committed = consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
    consumer.close()
    assert [(c.partition, c.offset) for c in committed] == [(0, 5), (1, 3)]  # the last checkpoint's offsets
    broker.produce(topic, rows([5, 6]), partition=0)
    broker.produce(topic, rows([103]), partition=1)
    weir.run(script("group-offsets", "second"), db="r.duckdb", name="second")
    import duckdb
    with duckdb.connect("r.duckdb", read_only=True) as con:
        assert sorted(v for (v,) in con.sql("SELECT v FROM second").fetchall()) == [5, 6, 103]

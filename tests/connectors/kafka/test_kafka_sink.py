"""The Kafka sinks against a real broker: formats and keys, at-least-once flushing at the
barrier, exactly-once transactions (which are begun, pre-committed, committed, aborted and
fenced, and when), upsert-kafka's tombstones, and the refusal of an updating input.

tansu shows aborted records to read_committed consumers (test_kafka_isolation.py), so the
transactions are checked on weir's side (the sink's record of its transaction calls, the
broker's fencing of a zombie producer) and in the broker's log, whose markers say which
records a read_committed consumer is owed (``Broker.committed``)."""
from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest

import weir
from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.connectors.registry import create_sink, create_source
from weir.engine.errors import ConnectorOptionError, EngineError
from weir.engine.runtime.source_reader import SourceReader
from weir.sql.errors import WeirSqlError

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64()), ("ts", pa.timestamp("us"))])


def rows(n: int, start: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"k": ["abc"[i % 3] for i in range(start, start + n)],
                                       "v": list(range(start, start + n)),
                                       "ts": [1_704_067_200_000_000 + i * 500_000 for i in range(start, start + n)]},
                                      schema=SCHEMA)


def sink(broker, topic: str, schema: pa.Schema = SCHEMA, subtask: int = 0, **options: str):
    base = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": broker.bootstrap, "format": "json"}
    return create_sink({**base, **options}, schema, subtask_index=subtask)


def test_at_least_once_flushes_at_the_barrier_with_keys_and_csv(broker):
    topic = broker.create_topic()
    out = sink(broker, topic, format="csv", **{"key.format": "json", "key.fields": "k"})
    out.open()
    out.write(rows(3))
    assert out.pre_commit(1) is None  # delivered at the barrier: nothing to commit later
    messages = broker.read(topic)
    assert [(key, value) for _, _, key, value in messages] == [
        (b'{"k":"a"}', b'"a",0,"2024-01-01 00:00:00"'), (b'{"k":"b"}', b'"b",1,"2024-01-01 00:00:00.500"'),
        (b'{"k":"c"}', b'"c",2,"2024-01-01 00:00:01"')]


def test_exactly_once_one_transaction_per_checkpoint_committed_when_it_completes(broker):
    topic = broker.create_topic()
    out = sink(broker, topic, **{"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": f"p-{topic}"})
    tid = f"p-{topic}-0"
    out.open()
    out.write(rows(2))
    handle = out.pre_commit(1)
    assert {k: v for k, v in handle.items() if k != "messages"} == {"transactional_id": tid, "checkpoint": 1, "rows": 2}
    out.write(rows(2, 2))  # after barrier 1, before checkpoint 1 completes: waits for transaction 2
    assert out.transactions == [("init", tid, None), ("begin", tid, None), ("pre-commit", tid, 1)]
    out.commit(1, handle)
    assert out.transactions[3:] == [("commit", tid, 1), ("begin", tid, None)]
    assert out.pre_commit(2)["rows"] == 2
    out.commit(2)
    assert out.pre_commit(3) is None  # no rows since barrier 2: no transaction
    out.write(rows(1, 4))
    out.abort()  # the job fails: the open transaction is aborted, never committed
    assert out.transactions[5:] == [("pre-commit", tid, 2), ("commit", tid, 2), ("begin", tid, None),
                                    ("abort", tid, None)]
    assert [json.loads(v)["v"] for _, _, _, v in broker.committed(topic)] == [0, 1, 2, 3]


def test_a_restarted_sink_fences_the_zombie_of_the_earlier_run(broker):
    topic = broker.create_topic()
    options = {"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": f"z-{topic}"}
    tid = f"z-{topic}-0"
    zombie = sink(broker, topic, **options)
    zombie.open()
    zombie.write(rows(2))
    # The job restarted while the old run still lives: the new run's open() initialises the same
    # transactional id, which aborts the zombie's transaction and fences it.
    fresh = sink(broker, topic, **options)
    fresh.open(resuming=True)
    zombie.write(rows(1, 2))
    with pytest.raises(EngineError, match="was fenced"):
        zombie.pre_commit(1)
    assert [event for event, _, _ in zombie.transactions] == ["init", "begin"]  # never committed
    assert broker.committed(topic) == []
    # Recovery initialises every transactional id a restored checkpoint's handles name, once.
    restored = sink(broker, topic, **options)
    restored.recover([{"transactional_id": tid, "checkpoint": 1, "rows": 2},
                      {"transactional_id": tid, "checkpoint": 1, "rows": 2}], checkpoint_id=1)
    assert restored.transactions == [("init", tid, 1)]


def test_a_plain_kafka_sink_refuses_an_updating_query(broker, in_tmp):
    src, dst = broker.create_topic(), broker.create_topic()
    script = f"""
    CREATE TABLE e (k VARCHAR, v BIGINT) WITH ('connector' = 'kafka', 'topic' = '{src}',
      'properties.bootstrap.servers' = '{broker.bootstrap}', 'format' = 'json');
    CREATE TABLE o (k VARCHAR, n BIGINT) WITH ('connector' = 'kafka', 'topic' = '{dst}',
      'properties.bootstrap.servers' = '{broker.bootstrap}', 'format' = 'json');
    INSERT INTO o SELECT k, COUNT(*) FROM e GROUP BY k;
    """
    with pytest.raises(WeirSqlError, match="append-only and cannot take an updating query"):
        weir.run(script, db="r.duckdb", name="refused")


def test_upsert_kafka_writes_keyed_changes_with_tombstones_and_reads_them_back(broker, in_tmp):
    src, dst = broker.create_topic(), broker.create_topic()
    changes = [{"before": None, "after": {"id": 1, "name": "a"}, "op": "c"},
               {"before": None, "after": {"id": 2, "name": "b"}, "op": "c"},
               {"before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "A"}, "op": "u"},
               {"before": {"id": 2, "name": "b"}, "after": None, "op": "d"},
               {"before": None, "after": {"id": 3, "name": "c"}, "op": "c"}]
    broker.produce(src, [json.dumps(c).encode() for c in changes], partition=0)
    common = f"'properties.bootstrap.servers' = '{broker.bootstrap}'"
    script = f"""
    CREATE TABLE users (id BIGINT, name VARCHAR) WITH ('connector' = 'kafka', 'topic' = '{src}', {common},
      'format' = 'debezium-json', 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');
    CREATE TABLE latest (id BIGINT, name VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (
      'connector' = 'upsert-kafka', 'topic' = '{dst}', {common}, 'key.format' = 'json', 'value.format' = 'json');
    INSERT INTO latest SELECT id, name FROM users;
    """
    weir.run(script, db="r.duckdb", name="upsert")
    written = [(key, value) for _, _, key, value in broker.read(dst)]
    # -U is not written (its +U overwrites the key); -D is a tombstone.
    assert written == [(b'{"id":1}', b'{"id":1,"name":"a"}'), (b'{"id":2}', b'{"id":2,"name":"b"}'),
                       (b'{"id":1}', b'{"id":1,"name":"A"}'), (b'{"id":2}', None),
                       (b'{"id":3}', b'{"id":3,"name":"c"}')]
    # Read back as an updating table: the latest value per key.
    back = f"""
    CREATE TABLE latest2 (id BIGINT, name VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (
      'connector' = 'upsert-kafka', 'topic' = '{dst}', {common}, 'key.format' = 'json', 'value.format' = 'json',
      'scan.bounded.mode' = 'latest-offset');
    CREATE MATERIALIZED VIEW current AS SELECT name, COUNT(*) AS n FROM latest2 GROUP BY name;
    """
    weir.run(back, db="r.duckdb", name="back")
    with duckdb.connect("r.duckdb", read_only=True) as con:
        assert con.sql("SELECT * FROM current ORDER BY name").fetchall() == [("A", 1), ("c", 1)]
    source = create_source({"connector": "upsert-kafka", "topic": dst, "properties.bootstrap.servers": broker.bootstrap,
                            "key.format": "json", "value.format": "json", "weir.primary-key": '["id"]',
                            "scan.bounded.mode": "latest-offset"},
                           pa.schema([("id", pa.int64()), ("name", pa.string())]))
    kinds = []
    for batch, _ in SourceReader(source, None):
        if batch is not None:
            kinds += zip(batch.column("id").to_pylist(), batch.column(ROW_KIND).to_pylist())
    assert kinds == [(1, INSERT), (2, INSERT), (1, UPDATE_BEFORE), (1, UPDATE_AFTER), (2, DELETE), (3, INSERT)]


def test_sink_options_name_the_fix(broker):
    with pytest.raises(ConnectorOptionError, match="needs 'sink.transactional-id-prefix'"):
        sink(broker, "t", **{"sink.delivery-guarantee": "exactly-once"})
    with pytest.raises(ConnectorOptionError, match="must be one of 'none', 'at-least-once', 'exactly-once'"):
        sink(broker, "t", **{"sink.delivery-guarantee": "exactly_once"})
    with pytest.raises(ConnectorOptionError, match="needs a PRIMARY KEY"):
        create_sink({"connector": "upsert-kafka", "topic": "t", "properties.bootstrap.servers": broker.bootstrap,
                     "key.format": "json", "value.format": "json"}, SCHEMA)


def test_a_completed_checkpoint_left_uncommitted_is_produced_again_once_on_recovery(broker):
    topic = broker.create_topic()
    options = {"sink.delivery-guarantee": "exactly-once", "sink.transactional-id-prefix": f"r-{topic}"}
    tid = f"r-{topic}-0"
    first = sink(broker, topic, **options)
    first.open()
    first.write(rows(2))
    first.commit(1, first.pre_commit(1))
    first.write(rows(3, 2))
    handle = first.pre_commit(2)  # checkpoint 2 completes; the job dies before its commit
    assert handle["rows"] == 3
    second = sink(broker, topic, **options)
    second.recover([handle], checkpoint_id=2)
    assert second.transactions == [("init", tid, 2), ("replay", tid, 2)]
    assert second._marked(tid) == 2
    # Recovering again (killed right after the replay): checkpoint 2 is committed, no replay.
    third = sink(broker, topic, **options)
    third.recover([handle], checkpoint_id=2)
    assert third.transactions == [("init", tid, 2)]
    # The first copy of checkpoint 2, flushed at its barrier, was aborted; the replay committed.
    fates = broker.decided(topic)
    assert [json.loads(v)["v"] for _, _, _, v in fates["committed"]] == [0, 1, 2, 3, 4]
    assert [json.loads(v)["v"] for _, _, _, v in fates["aborted"]] == [2, 3, 4] and not fates["open"]

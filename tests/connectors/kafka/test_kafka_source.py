"""The Kafka source against a real broker: formats, key and metadata columns, startup and
bounded modes, partitions divided among workers, and its checkpointed offsets."""
from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest

import weir
from weir.engine.connectors.registry import create_source
from weir.engine.errors import ConnectorOptionError, SourceError
from weir.engine.runtime.source_reader import SourceReader
from weir.sql.errors import WeirSqlError


def events(n: int, start: int = 0) -> list[bytes]:
    return [json.dumps({"ts": f"2024-01-01 00:00:{i % 60:02d}", "k": "abc"[i % 3], "v": i}).encode()
            for i in range(start, start + n)]


def with_options(broker, topic: str, extra: dict[str, str] | None = None) -> str:
    options = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": broker.bootstrap,
               "scan.startup.mode": "earliest-offset", "scan.bounded.mode": "latest-offset", "format": "json",
               **(extra or {})}
    return "WITH (" + ", ".join(f"'{k}' = '{v}'" for k, v in options.items()) + ")"


def view(db, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql(sql).fetchall()


def test_a_bounded_json_backfill_over_two_partitions_fires_every_window(broker, in_tmp):
    topic = broker.create_topic(partitions=2)
    broker.produce(topic, events(20), partition=0)
    broker.produce(topic, events(20, 20), partition=1)
    script = f"""
    CREATE TABLE e (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
    {with_options(broker, topic)};
    CREATE MATERIALIZED VIEW w AS SELECT window_start, COUNT(*) AS n, SUM(v) AS total
    FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;
    """
    result = weir.run(script, db="r.duckdb", name="backfill")
    assert result.rows_read == 40
    expected = {}
    for i in range(40):
        start = (i % 60) // 10 * 10
        n, total = expected.get(start, (0, 0))
        expected[start] = (n + 1, total + i)
    rows = view("r.duckdb", "SELECT second(window_start), n, total FROM w ORDER BY 1")
    assert rows == sorted((s, n, t) for s, (n, t) in expected.items())


def test_metadata_columns_key_fields_and_csv_values(broker, in_tmp):
    topic = broker.create_topic(partitions=1)
    broker.produce(topic, [b"1,x", b"2,y", b"3,z"], keys=[b'{"id": 10}', b'{"id": 20}', b'{"id": 30}'],
                   timestamps=[1_700_000_000_000, 1_700_000_001_000, 1_700_000_002_500])
    script = f"""
    CREATE TABLE e (id BIGINT, n BIGINT, s VARCHAR, `off` BIGINT METADATA FROM 'offset',
      `part` INT METADATA FROM 'partition', `ts` TIMESTAMP(3) METADATA FROM 'timestamp' VIRTUAL,
      `topic` VARCHAR METADATA)
    {with_options(broker, topic, {"format": "csv", "key.format": "json", "key.fields": "id",
                                  "value.fields-include": "EXCEPT_KEY"})};
    CREATE MATERIALIZED VIEW m AS SELECT * FROM e;
    """
    weir.run(script, db="r.duckdb", name="meta")
    rows = view("r.duckdb", "SELECT id, n, s, off, part, epoch_ms(ts), topic FROM m ORDER BY off")
    assert rows == [(10, 1, "x", 0, 0, 1_700_000_000_000, topic), (20, 2, "y", 1, 0, 1_700_000_001_000, topic),
                    (30, 3, "z", 2, 0, 1_700_000_002_500, topic)]


def source(broker, topic: str, schema: pa.Schema, batch_size: int = 7, **options: str):
    base = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": broker.bootstrap,
            "scan.startup.mode": "earliest-offset", "scan.bounded.mode": "latest-offset", "format": "json"}
    return create_source({**base, **options}, schema, batch_size=batch_size)


SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])


def read_all(src, offsets=None, subtask=0, parallelism=1) -> tuple[list[int], dict]:
    reader = SourceReader(src, None, offsets, subtask=subtask, parallelism=parallelism)
    values = []
    for batch, _ in reader:
        if batch is not None:
            values += batch.column("v").to_pylist()
    return values, dict(reader.offsets)


def test_offsets_resume_each_partition_exactly_where_a_checkpoint_left_it(broker):
    topic = broker.create_topic(partitions=3)
    for p in range(3):
        broker.produce(topic, events(10, 100 * p), partition=p)
    everything, ends = read_all(source(broker, topic, SCHEMA))
    assert sorted(everything) == [100 * p + i for p in range(3) for i in range(10)]
    assert ends == {f"{topic}:{p}": 10 for p in range(3)}
    # A checkpoint after 4, 0 and 9 rows of the partitions: the rest, each row once.
    rest, _ = read_all(source(broker, topic, SCHEMA), {f"{topic}:0": 4, f"{topic}:1": 0, f"{topic}:2": 9})
    assert sorted(rest) == sorted([4, 5, 6, 7, 8, 9, *range(100, 110), 209])


@pytest.mark.parametrize("batch_size", [1, 3, 1000])
def test_workers_divide_the_partitions_and_together_read_each_message_once(broker, batch_size):
    topic = broker.create_topic(partitions=3)
    for p in range(3):
        broker.produce(topic, events(5, 10 * p), partition=p)
    parts = [read_all(source(broker, topic, SCHEMA, batch_size), subtask=i, parallelism=2)[0] for i in range(2)]
    assert sorted(parts[0] + parts[1]) == sorted(10 * p + i for p in range(3) for i in range(5))
    assert parts[0] and parts[1]


def test_startup_and_bounded_specific_offsets_and_timestamps(broker):
    topic = broker.create_topic(partitions=2)
    broker.produce(topic, events(10), partition=0, timestamps=[1000 * (i + 1) for i in range(10)])
    broker.produce(topic, events(10, 100), partition=1, timestamps=[1000 * (i + 1) for i in range(10)])
    values, _ = read_all(source(broker, topic, SCHEMA, **{
        "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0,offset:7;partition:1,offset:2",
        "scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:9;partition:1,offset:4"}))
    assert sorted(values) == [7, 8, 102, 103]
    values, _ = read_all(source(broker, topic, SCHEMA, **{
        "scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": "6000",
        "scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": "8000"}))
    assert sorted(values) == [5, 6, 105, 106]


def test_group_offsets_start_where_the_group_committed(broker):
    from confluent_kafka import Consumer, TopicPartition
    topic = broker.create_topic(partitions=1)
    broker.produce(topic, events(6), partition=0)
    group = f"g-{topic}"
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    consumer.close()
    values, _ = read_all(source(broker, topic, SCHEMA, **{"scan.startup.mode": "group-offsets",
                                                         "properties.group.id": group}))
    assert values == [4, 5]
    with pytest.raises(SourceError, match="auto.offset.reset"):
        read_all(source(broker, topic, SCHEMA, **{"scan.startup.mode": "group-offsets",
                                                  "properties.group.id": group + "-new"}))


def test_raw_values_and_a_malformed_json_message(broker):
    topic = broker.create_topic(partitions=1)
    broker.produce(topic, [b'{"k": "a", "v": 1}', b"not json", b'{"k": "b", "v": 2}'], partition=0)
    with pytest.raises(SourceError, match="(?s)at offset 1: JSON parse error.*ignore-parse-errors"):
        read_all(source(broker, topic, SCHEMA))
    src = source(broker, topic, SCHEMA, **{"json.ignore-parse-errors": "true"})
    assert read_all(src)[0] == [1, 2] and src.skipped_rows == 1
    raw = source(broker, topic, pa.schema([("line", pa.string())]), format="raw")
    lines = []
    for batch, _ in SourceReader(raw, None):
        lines += batch.column("line").to_pylist() if batch is not None else []
    assert lines == ['{"k": "a", "v": 1}', "not json", '{"k": "b", "v": 2}']


def test_debezium_json_becomes_a_changelog(broker, in_tmp):
    topic = broker.create_topic(partitions=1)
    changes = [{"before": None, "after": {"id": 1, "name": "a"}, "op": "c"},
               {"before": None, "after": {"id": 2, "name": "b"}, "op": "r"},
               {"before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "A"}, "op": "u"},
               {"before": {"id": 2, "name": "b"}, "after": None, "op": "d"}]
    broker.produce(topic, [json.dumps(c).encode() for c in changes], partition=0)
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    src = source(broker, topic, schema, format="debezium-json")
    rows = []
    for batch, _ in SourceReader(src, None):
        rows += batch.to_pylist() if batch is not None else []
    assert [(r["id"], r["name"], r["_row_kind"]) for r in rows] == [
        (1, "a", 0), (2, "b", 0), (1, "a", 1), (1, "A", 2), (2, "b", 3)]
    # In SQL: an updating table, kept by a GROUP BY.
    script = f"""
    CREATE TABLE users (id BIGINT, name VARCHAR) {with_options(broker, topic, {"format": "debezium-json"})};
    CREATE MATERIALIZED VIEW names AS SELECT name, COUNT(*) AS n FROM users GROUP BY name;
    """
    weir.run(script, db="r.duckdb", name="cdc")
    assert view("r.duckdb", "SELECT * FROM names ORDER BY name") == [("A", 1)]


def test_bad_options_name_the_fix(broker):
    with pytest.raises(ConnectorOptionError, match="properties.bootstrap.servers"):
        create_source({"connector": "kafka", "topic": "t", "format": "json"}, SCHEMA)
    with pytest.raises(ConnectorOptionError, match="did you mean 'scan.startup.mode'"):
        create_source({"connector": "kafka", "topic": "t", "format": "json", "properties.bootstrap.servers": "x",
                       "scan.startup.mod": "earliest-offset"}, SCHEMA)
    with pytest.raises(ConnectorOptionError, match="'key.fields' is set but 'key.format' is not"):
        create_source({"connector": "kafka", "topic": "t", "format": "json", "properties.bootstrap.servers": "x",
                       "key.fields": "k"}, SCHEMA)
    with pytest.raises(ConnectorOptionError, match="needs 'scan.startup.specific-offsets'"):
        read_all(source(broker, broker.create_topic(), SCHEMA, **{"scan.startup.mode": "specific-offsets"}))
    with pytest.raises(SourceError, match="topic 'no-such-topic' does not exist"):
        source(broker, "no-such-topic", SCHEMA).splits()


def test_a_job_at_parallelism_2_reads_every_partition_once(broker, in_tmp):
    topic = broker.create_topic(partitions=3)
    for p in range(3):
        broker.produce(topic, events(8, 8 * p), partition=p)
    script = f"""
    SET 'parallelism.default' = '2';
    CREATE TABLE e (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
    {with_options(broker, topic)};
    CREATE MATERIALIZED VIEW per_key AS SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total
    FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
    """
    weir.run(script, db="r.duckdb", name="parallel")
    rows = view("r.duckdb", "SELECT k, SUM(n), SUM(total) FROM per_key GROUP BY k ORDER BY k")
    assert rows == [(k, 8, sum(i for i in range(24) if "abc"[i % 3] == k)) for k in "abc"]


def test_a_metadata_column_of_a_connector_without_metadata_is_refused_at_the_column():
    con = weir.connect(db=":memory:")
    with pytest.raises(WeirSqlError, match=r"connector 'filesystem' has no metadata columns, but `o` is declared METADATA"):
        con.execute("CREATE TABLE f (a BIGINT, o BIGINT METADATA FROM 'offset') "
                    "WITH ('connector' = 'filesystem', 'path' = '.', 'format' = 'csv')")

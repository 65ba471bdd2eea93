"""The upsert-kafka source's changes (+I, -U/+U, -D with the old row, nothing for a tombstone
of an unknown key) equal a row-by-row model's, whatever the batch size: the vectorised
batch step must find a key's old row in the same batch or in the kept state alike."""
from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.connectors.registry import create_source
from weir.engine.runtime.source_reader import SourceReader

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("off", pa.int64())])


def model(messages: list[tuple[int, str | None]]) -> list[tuple]:
    """Flink's upsert-kafka semantics, one message at a time."""
    state, out = {}, []
    for offset, (key, name) in enumerate(messages):
        old = state.get(key)
        if name is None:
            if old is not None:
                out.append((*old, DELETE))
                del state[key]
            continue
        row = (key, name, offset)
        out += [(*old, UPDATE_BEFORE), (*row, UPDATE_AFTER)] if old is not None else [(*row, INSERT)]
        state[key] = row
    return out


@pytest.fixture(scope="module")
def topic_and_messages(broker):
    rng = random.Random(7)
    messages = [(rng.randrange(5), None if rng.random() < 0.3 else f"n{i}") for i in range(60)]
    topic = broker.create_topic()
    broker.produce(topic, [None if name is None else json.dumps({"id": key, "name": name}).encode()
                           for key, name in messages],
                   keys=[json.dumps({"id": key}).encode() for key, _ in messages], partition=0)
    return topic, messages


@pytest.mark.parametrize("batch_size", [1, 4, 1000])
def test_upsert_changes_match_the_row_by_row_model_at_any_batch_size(broker, topic_and_messages, batch_size):
    topic, messages = topic_and_messages
    source = create_source({"connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": broker.bootstrap,
                            "key.format": "json", "value.format": "json", "weir.primary-key": '["id"]',
                            "scan.bounded.mode": "latest-offset", "weir.metadata": json.dumps({"off": "offset"})},
                           SCHEMA, batch_size=batch_size)
    changes = []
    for batch, _ in SourceReader(source, None):
        if batch is not None:
            changes += zip(*(batch.column(c).to_pylist() for c in ("id", "name", "off", ROW_KIND)))
    assert changes == model(messages)


# -- the last rows per key are part of the checkpoint ----------------------------------------
CUT_SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("off", pa.int64()), ("part", pa.int32())])


#: One partition's messages (key, name or None for a tombstone). A checkpoint at offset 4 or 9
#: falls between a key's last row and its update (4: k1, 9: k2) and its tombstone (4: k2, 9: k3).
SCRIPTED = [(1, "a"), (2, "b"), (1, "c"), (3, "d"), (1, "e"), (2, None), (3, "f"), (2, "g"), (1, None),
            (2, "h"), (3, None), (1, "i")]


def produce_keyed(broker, topic, messages, partition):
    broker.produce(topic, [None if name is None else json.dumps({"id": key, "name": name}).encode()
                           for key, name in messages],
                   keys=[json.dumps({"id": key}).encode() for key, _ in messages], partition=partition)


@pytest.fixture(scope="module")
def two_partitions(broker):
    """Two partitions with their own keys (as a producer partitions by key): 0 has SCRIPTED,
    1 a seeded random sequence over keys 10..12."""
    rng = random.Random(11)
    topic = broker.create_topic(partitions=2)
    produce_keyed(broker, topic, SCRIPTED, 0)
    produce_keyed(broker, topic, [(10 + rng.randrange(3), None if rng.random() < 0.25 else f"n{i}")
                                  for i in range(24)], 1)
    return topic


def cut_source(broker, topic, batch_size=1):
    return create_source({"connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": broker.bootstrap,
                          "key.format": "json", "value.format": "json", "weir.primary-key": '["id"]',
                          "scan.bounded.mode": "latest-offset",
                          "weir.metadata": json.dumps({"off": "offset", "part": "partition"})},
                         CUT_SCHEMA, batch_size=batch_size)


def changes(batch) -> list[tuple]:
    return list(zip(*(batch.column(c).to_pylist() for c in ("id", "name", "off", "part", ROW_KIND))))


def read(reader: SourceReader, until: dict[int, int] | None = None) -> list[tuple]:
    """The changes, as (id, name, off, part, kind), until each partition in ``until`` reached
    that offset (batches of one message: exactly), or to the end."""
    out = []
    steps = iter(reader)
    for batch, _ in steps:
        if batch is not None:
            out += changes(batch)
        if until is not None and all(next_offsets(reader.position()).get(p, 0) >= n for p, n in until.items()):
            break
    return out


def by_partition(found: list[tuple]) -> dict[int, list[tuple]]:
    """Each partition's changelog in order (the order across partitions is the reader's round-robin)."""
    out: dict[int, list[tuple]] = {}
    for change in found:
        out.setdefault(change[3], []).append(change)
    return out


def as_checkpointed(position: dict) -> dict:
    return json.loads(json.dumps(position))  # a checkpoint's metadata is JSON


def next_offsets(position: dict) -> dict[int, int]:
    """Each partition's next offset in a reader's position (0: none read yet)."""
    return {int(split.rpartition(":")[2]): (offset.offset if hasattr(offset, "offset") else
                                            (offset or {}).get("offset")) or 0
            for split, offset in position["offsets"].items()}


@pytest.mark.parametrize("cut", [4, 9])
def test_a_restore_from_a_checkpoint_gives_the_changelog_of_an_uninterrupted_read(broker, two_partitions, cut):
    straight = by_partition(read(SourceReader(cut_source(broker, two_partitions), None)))
    reader = SourceReader(cut_source(broker, two_partitions), None)
    before = read(reader, until={0: cut})
    position = as_checkpointed(reader.position())
    assert next_offsets(position)[0] == cut
    restored = SourceReader(cut_source(broker, two_partitions), None)
    restored.restore(position)
    after = read(restored)
    assert by_partition(before + after) == straight
    # Keys read before the checkpoint are updated (-U of their old row) and deleted after it.
    assert {kind for _, _, off, part, kind in after if part == 0 and off < cut} == {UPDATE_BEFORE, DELETE}


@pytest.mark.parametrize("batch_size", [1, 3])
def test_a_savepoint_at_parallelism_2_restores_at_1_with_each_partitions_last_rows(broker, two_partitions,
                                                                                   batch_size):
    straight = by_partition(read(SourceReader(cut_source(broker, two_partitions, batch_size), None)))
    readers = [SourceReader(cut_source(broker, two_partitions, batch_size), None, subtask=i, parallelism=2)
               for i in range(2)]
    assert sorted(len(r.splits) for r in readers) == [1, 1]  # a partition each
    before = []
    for reader in readers:
        before += read(reader, until={int(reader.splits[0][-1]): 4 + 5 * int(reader.splits[0][-1])})
    merged = {"offsets": {}, "split_watermarks": {}, "finished_splits": []}  # as the coordinator merges them
    for reader in readers:
        position = as_checkpointed(reader.position())
        merged["offsets"].update(position["offsets"])
        merged["split_watermarks"].update(position["split_watermarks"])
    one = SourceReader(cut_source(broker, two_partitions, batch_size), None)
    one.restore(merged)
    after = read(one)
    assert by_partition(before + after) == straight
    at = next_offsets(merged)
    assert any(kind == UPDATE_BEFORE and part == 0 and off < at[0] for _, _, off, part, kind in after)


def test_a_job_failing_at_any_batch_boundary_writes_the_changelog_of_one_that_never_failed(broker, two_partitions,
                                                                                            tmp_path):
    from unittest import mock

    from weir.engine import faults
    from weir.engine.errors import EngineError
    from weir.engine.runtime.job import JobOptions, run_job
    from weir.planner.planner import plan_script
    from weir.sql import parse

    sql = f"""
    CREATE TABLE users (id BIGINT, name VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (
      'connector' = 'upsert-kafka', 'topic' = '{two_partitions}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
      'key.format' = 'json', 'value.format' = 'json', 'scan.bounded.mode' = 'latest-offset');
    CREATE TABLE changes (id BIGINT, name VARCHAR)
    WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'debezium-json');
    INSERT INTO changes SELECT id, name FROM users;
    """
    settings = {"weir.source.batch-size": "4", "weir.checkpointing.interval-batches": "1",
                "restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "10",
                "restart-strategy.fixed-delay.delay": "0s"}

    def run(directory, fail_at: set[int]) -> list[dict]:
        reached, warnings = [0], []

        def reach(point: str) -> None:
            if point == "batch":
                reached[0] += 1
                if reached[0] in fail_at:
                    raise EngineError(f"failure at batch #{reached[0]}")

        script = plan_script(parse(sql.replace("'out'", f"'{directory / 'out'}'")), db_path=str(directory / "v.duckdb"),
                             settings=settings)
        with mock.patch.object(faults, "reach", reach):
            run_job(script.graph, JobOptions(state_dir=directory / "state", warn=warnings.append))
        assert sum("restarting from its latest checkpoint" in w for w in warnings) == len(fail_at), warnings
        parts = sorted((directory / "out").glob("part-*"), key=lambda p: int(p.stem.split("-")[2]))
        return [json.loads(line) for p in parts for line in p.read_text().splitlines()]

    straight = run(tmp_path / "straight", set())
    assert sum(1 for e in straight if e["op"] == "d" and e["before"] is not None) > 4  # -U and -D rows
    assert run(tmp_path / "failing", {3, 7, 12}) == straight

"""A Kafka job stopped with a savepoint at parallelism 2 finishes exactly at 1 and at 3: the
checkpoint records each partition's offset (and an upsert-kafka partition's last rows), and
no assignment, so each partition resumes on whichever subtask ``Source.owner`` gives it now."""
from __future__ import annotations

import json
import random
from collections import Counter

import duckdb
import pytest

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

from jobs import stop_after_first_checkpoint

EVENTS = 300  # 100 batches of 2 per partition at parallelism 2: the stop comes part-way


@pytest.fixture(scope="module")
def topics(broker):
    events = broker.create_topic(partitions=3)
    for p in range(3):  # event i at second i, on partition i % 3
        broker.produce(events, [json.dumps({"ts": f"2024-01-01 00:{i // 60:02d}:{i % 60:02d}", "k": "ab"[i % 2], "v": i}).encode()
                                for i in range(EVENTS) if i % 3 == p], partition=p)
    users = broker.create_topic(partitions=2)
    rng = random.Random(5)
    messages = [(k, None if rng.random() < 0.2 else f"n{rng.randrange(4)}") for k in [rng.randrange(6) for _ in range(200)]]
    for p in range(2):  # key k in partition k % 2, as a producer partitions by key
        mine = [(k, name) for k, name in messages if k % 2 == p]
        broker.produce(users, [None if name is None else json.dumps({"id": k, "name": name}).encode() for k, name in mine],
                       keys=[json.dumps({"id": k}).encode() for k, _ in mine], partition=p)
    last = {}
    for k, name in messages:
        last[k] = name
    return events, users, Counter(name for name in last.values() if name is not None)


def run(broker, topics, tmp, parallelism: int, *, savepoint=None, stop: bool = False):
    events, users, _ = topics
    common = f"'properties.bootstrap.servers' = '{broker.bootstrap}', 'scan.bounded.mode' = 'latest-offset'"
    sql = f"""
    CREATE TABLE e (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
    WITH ('connector' = 'kafka', 'topic' = '{events}', {common}, 'format' = 'json', 'scan.startup.mode' = 'earliest-offset');
    CREATE TABLE users (id BIGINT, name VARCHAR, PRIMARY KEY (id) NOT ENFORCED)
    WITH ('connector' = 'upsert-kafka', 'topic' = '{users}', {common}, 'key.format' = 'json', 'value.format' = 'json');
    CREATE MATERIALIZED VIEW w AS SELECT k, window_start, COUNT(*) AS n, SUM(v) AS total
    FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
    CREATE MATERIALIZED VIEW names AS SELECT name, COUNT(*) AS n FROM users GROUP BY name;
    """
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "2",
                "weir.checkpointing.interval-batches": "3"}
    script = plan_script(parse(sql), db_path=str(tmp / "v.duckdb"), settings=settings)

    options = JobOptions(state_dir=tmp / "state", from_savepoint=savepoint,
                         on_checkpoint=stop_after_first_checkpoint(tmp / "state") if stop else None)
    return run_job(script.graph, options)


@pytest.mark.parametrize("after", [1, 3])
def test_a_kafka_savepoint_at_parallelism_2_restores_exactly_at_another(broker, topics, tmp_path, after):
    first = run(broker, topics, tmp_path, 2, stop=True)
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    run(broker, topics, tmp_path, after, savepoint=first.stopped_with.path)
    with duckdb.connect(str(tmp_path / "v.duckdb"), read_only=True) as con:
        windows = con.sql("SELECT k, epoch(window_start)::BIGINT - 1704067200, n, total FROM w ORDER BY ALL").fetchall()
        names = dict(con.sql("SELECT name, n FROM names").fetchall())
    expected = Counter()
    for i in range(EVENTS):
        expected[("ab"[i % 2], i // 10 * 10)] += 1
    assert windows == sorted((k, s, n, sum(i for i in range(EVENTS) if "ab"[i % 2] == k and i // 10 * 10 == s))
                             for (k, s), n in expected.items())
    assert names == dict(topics[2])  # each live key's last name once: -U/+U and -D across the restore

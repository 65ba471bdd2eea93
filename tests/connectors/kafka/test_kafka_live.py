"""An unbounded Kafka job: a view over a topic fills while messages arrive, an idle partition
stops holding the watermark back after 'source.idle-timeout', and the client is imported
only when a Kafka table is used."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import weir


def wait_until(condition, what: str, limit: float = 60.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)  # polling a view another thread maintains; the assertion is on content
    pytest.fail(f"timed out waiting for {what}")


def test_a_live_view_over_an_unbounded_topic_with_an_idle_partition(broker, in_tmp):
    topic = broker.create_topic(partitions=2)
    script = f"""
    SET 'execution.checkpointing.interval' = '200ms';
    CREATE TABLE e (ts TIMESTAMP(3), v BIGINT, WATERMARK FOR ts AS ts)
    WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.bootstrap}',
          'scan.startup.mode' = 'earliest-offset', 'format' = 'json', 'source.idle-timeout' = '300ms');
    CREATE MATERIALIZED VIEW w AS SELECT window_start, COUNT(*) AS n, SUM(v) AS total
    FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;
    """
    with weir.connect(db="r.duckdb", state_dir=in_tmp / "jobs") as con:
        job = con.submit(script, name="live")
        # Only partition 0 gets rows; partition 1 stays empty and idles 300 ms after the job starts
        # reading (4 checkpoints at 200 ms later it has). Without the timeout no window would fire.
        wait_until(lambda: (job.metrics().last_checkpoint or "-").isdigit() and int(job.metrics().last_checkpoint) >= 4, "the job to read and checkpoint")
        broker.produce(topic, [json.dumps({"ts": f"2024-01-01 00:00:{s:02d}", "v": s}).encode()
                               for s in (1, 2, 3, 12)], partition=0)
        rows = wait_until(lambda: con.sql("SELECT second(window_start), n, total FROM w").fetchall(),
                          "the first window to fire")
        assert rows == [(0, 3, 6)]  # [0 s, 10 s) fired by the watermark 12 s; [10 s, 20 s) still open
        broker.produce(topic, [json.dumps({"ts": "2024-01-01 00:00:25", "v": 100}).encode()], partition=0)
        rows = wait_until(lambda: [r for r in con.sql("SELECT second(window_start), n, total FROM w ORDER BY 1")
                                   .fetchall() if r[0] == 10], "the second window")
        assert rows == [(10, 1, 12)]
        job.stop(savepoint=False)
        assert job.wait(60) in ("FINISHED", "CANCELED", "STOPPED")


def test_the_kafka_client_is_imported_only_by_a_kafka_table(tmp_path):
    code = ("import sys, weir\n"
            "con = weir.connect(db=':memory:')\n"
            "con.execute(\"CREATE TABLE f (a BIGINT) WITH ('connector' = 'filesystem', 'path' = '.', 'format' = 'csv')\")\n"
            "print('confluent_kafka' in sys.modules)\n"
            "con.execute(\"CREATE TABLE k (a BIGINT) WITH ('connector' = 'kafka', 'topic' = 't', "
            "'properties.bootstrap.servers' = '127.0.0.1:1', 'format' = 'json')\")\n"
            "print('confluent_kafka' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert result.stdout.split() == ["False", "False"]  # declaring is not using: still not imported


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_live_job_reads_a_topic_that_appears_and_resumes_it_from_a_savepoint(broker, in_tmp, parallelism):
    # tansu refuses CreatePartitions: a new topic of 'topic-pattern' is the same new split.
    prefix = f"live-{broker.create_topic()}-"
    first = broker.create_topic(prefix + "a")  # with 2 workers, worker 1 starts with no partition
    script = f"""
    SET 'execution.checkpointing.interval' = '100ms';
    SET 'parallelism.default' = '{parallelism}';
    CREATE TABLE e (v BIGINT) WITH ('connector' = 'kafka', 'topic-pattern' = '{prefix}.*',
      'properties.bootstrap.servers' = '{broker.bootstrap}', 'scan.startup.mode' = 'earliest-offset',
      'format' = 'json', 'scan.topic-partition-discovery.interval' = '100ms');
    CREATE MATERIALIZED VIEW m AS SELECT v FROM e;
    """

    def values(con):
        return sorted(v for (v,) in con.sql("SELECT v FROM m").fetchall())

    with weir.connect(db="r.duckdb", state_dir=in_tmp / "jobs") as con:
        job = con.submit(script, name="found")
        broker.produce(first, [b'{"v": 1}'], partition=0)
        wait_until(lambda: values(con) == [1], "the first topic's row")
        second = broker.create_topic(prefix + "b", partitions=2)
        broker.produce(second, [b'{"v": 10}'], partition=0)
        broker.produce(second, [b'{"v": 11}'], partition=1)
        assert wait_until(lambda: values(con) == [1, 10, 11], "the new topic's rows")
        savepoint = job.stop(savepoint=True)
        broker.produce(first, [b'{"v": 2}'], partition=0)
        broker.produce(second, [b'{"v": 12}'], partition=1)
        job = con.submit(script, name="found", from_savepoint=savepoint)
        assert wait_until(lambda: values(con) == [1, 2, 10, 11, 12], "both topics after the restart")
        job.stop(savepoint=False)

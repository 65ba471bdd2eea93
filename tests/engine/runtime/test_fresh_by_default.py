"""Without 'execution.checkpointing.interval', a job over an unbounded source whose output shows
only at checkpoints (a materialized view, a transactional sink) checkpoints every second."""
from __future__ import annotations

from pathlib import Path

import pytest

from weir.engine.runtime.job import JobOptions, checkpoint_config
from weir.planner.planner import plan_script
from weir.sql import parse

DATAGEN = "CREATE TABLE t (x BIGINT) WITH ('connector' = 'datagen'{extra});"
VIEW = "CREATE MATERIALIZED VIEW v AS SELECT x, COUNT(*) AS n FROM t GROUP BY x;"
PRINT = "CREATE TABLE p (x BIGINT) WITH ('connector' = 'print'); INSERT INTO p SELECT x FROM t;"
KAFKA = ("CREATE TABLE k (x BIGINT) WITH ('connector' = 'kafka', 'topic' = 'out', 'format' = 'json', "
         "'properties.bootstrap.servers' = '127.0.0.1:9', {guarantee}); INSERT INTO k SELECT x FROM t;")
EXACTLY_ONCE = "'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'k'"


def interval(text: str, tmp_path: Path) -> float | None:
    graph = plan_script(parse(text), db_path=str(tmp_path / "w.duckdb")).graph
    return checkpoint_config(graph, JobOptions(state_dir=tmp_path)).interval


@pytest.mark.parametrize("source, sink, expected", [
    (DATAGEN.format(extra=""), VIEW, 1.0),  # unbounded, a view: fresh
    (DATAGEN.format(extra=", 'number-of-rows' = '10'"), VIEW, None),  # bounded: checkpoints at the end
    (DATAGEN.format(extra=""), PRINT, None),  # the print sink shows rows as they come anyway
    # Kafka's sink commits transactions at checkpoints only when it is exactly-once
    (DATAGEN.format(extra=""), KAFKA.format(guarantee=EXACTLY_ONCE), 1.0),
    (DATAGEN.format(extra=""), KAFKA.format(guarantee="'sink.delivery-guarantee' = 'at-least-once'"), None),
    (DATAGEN.format(extra=""), "SET 'execution.checkpointing.interval' = '7s';" + VIEW, 7.0),  # said: as said
])
def test_the_default_interval(tmp_path, source, sink, expected):
    assert interval(source + sink, tmp_path) == expected

"""Each stateful operator declares what its state depends on; restoring a checkpoint whose
state no longer fits the changed job is refused, naming the operator and what changed."""
from __future__ import annotations

from pathlib import Path

import pytest

from weir.engine.checkpoint.coordinator import Coordinator
from weir.engine.errors import EngineError
from weir.engine.operators.registry import OPERATORS
from weir.engine.runtime.job import JobOptions, checkpoint_config, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

TABLES = """
SET 'weir.checkpointing.interval-batches' = '2';
SET 'weir.source.batch-size' = '2';
CREATE TABLE bids (ts TIMESTAMP(3), auction BIGINT, bidder BIGINT, price BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = 'bids.csv', 'format' = 'csv');
CREATE TABLE people (id BIGINT, name VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = 'people.csv', 'format' = 'csv');
"""
BIDS = """ts,auction,bidder,price
2024-01-01 00:00:01,1,10,100
2024-01-01 00:00:02,1,11,120
2024-01-01 00:00:04,2,10,90
2024-01-01 00:00:09,2,12,95
2024-01-01 00:00:15,1,11,130
"""
PEOPLE = """id,name,ts
10,ann,2024-01-01 00:00:00
11,bob,2024-01-01 00:00:00
12,eve,2024-01-01 00:00:00
"""

#: kind -> (the job, the same job changed so that the operator's state no longer fits, what the
#: refusal names as changed).
CHANGES = {
    "group_aggregate": (
        "CREATE MATERIALIZED VIEW v AS SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction;",
        "CREATE MATERIALIZED VIEW v AS SELECT auction, MAX(price) AS n FROM bids GROUP BY auction;",
        "aggregates was"),
    "stream_join": (
        "CREATE MATERIALIZED VIEW v AS SELECT b.auction, p.name FROM bids AS b JOIN people AS p ON b.bidder = p.id;",
        "CREATE MATERIALIZED VIEW v AS SELECT b.auction, p.name FROM bids AS b JOIN people AS p ON b.auction = p.id;",
        "left.keys was [\"bidder\"], is now [\"auction\"]"),
    "top_n": (
        "CREATE MATERIALIZED VIEW v AS SELECT * FROM (SELECT *, ROW_NUMBER() OVER "
        "(PARTITION BY auction ORDER BY price DESC) AS rn FROM bids) WHERE rn <= 1;",
        "CREATE MATERIALIZED VIEW v AS SELECT * FROM (SELECT *, ROW_NUMBER() OVER "
        "(PARTITION BY auction ORDER BY price DESC) AS rn FROM bids) WHERE rn <= 3;",
        "rank_range was [1, 1], is now [1, 3]"),
    "session_window": (
        "CREATE MATERIALIZED VIEW v AS SELECT bidder, window_start, COUNT(*) AS n FROM TABLE(SESSION(TABLE bids "
        "PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '3' SECOND)) GROUP BY bidder, window_start, window_end;",
        "CREATE MATERIALIZED VIEW v AS SELECT bidder, window_start, COUNT(*) AS n FROM TABLE(SESSION(TABLE bids "
        "PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '30' SECOND)) GROUP BY bidder, window_start, window_end;",
        "window.gap was 3000000, is now 30000000"),
    "over_aggregate": (
        "CREATE MATERIALIZED VIEW v AS SELECT auction, ts, SUM(price) OVER (PARTITION BY auction ORDER BY ts "
        "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM bids;",
        "CREATE MATERIALIZED VIEW v AS SELECT auction, ts, SUM(price) OVER (PARTITION BY auction ORDER BY ts "
        "ROWS BETWEEN 4 PRECEDING AND CURRENT ROW) AS s FROM bids;",
        "frame.preceding was 1, is now 4"),
    "window_aggregate": (
        "CREATE MATERIALIZED VIEW v AS SELECT auction, window_start, COUNT(*) AS n "
        "FROM TUMBLE(bids, ts, INTERVAL '10' SECOND) GROUP BY auction, window_start, window_end;",
        "CREATE MATERIALIZED VIEW v AS SELECT auction, window_start, COUNT(*) AS n "
        "FROM TUMBLE(bids, ts, INTERVAL '5' SECOND) GROUP BY auction, window_start, window_end;",
        "window.size was 10000000, is now 5000000"),
}


def graph_of(sql: str, tmp_path: Path):
    return plan_script(parse(TABLES + sql), job_name="shape", db_path=str(tmp_path / "results.duckdb")).graph


def checkpoint_of(sql: str, tmp_path: Path) -> Path:
    """Run the job to its end with checkpoints; the path of its last checkpoint."""
    state = tmp_path / "state"
    graph = graph_of(sql, tmp_path)
    run_job(graph, JobOptions(state_dir=state))
    return checkpoint_config(graph, JobOptions(state_dir=state)).storage.completed()[-1].path


def restore(sql: str, tmp_path: Path, checkpoint: Path) -> None:
    graph = graph_of(sql, tmp_path)
    Coordinator(graph, checkpoint_config(graph, JobOptions(state_dir=tmp_path / "state",
                                                           from_savepoint=checkpoint))).restore_point()


@pytest.fixture
def inputs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("bids.csv").write_text(BIDS)
    Path("people.csv").write_text(PEOPLE)
    return tmp_path


@pytest.mark.parametrize("kind", sorted(CHANGES))
def test_a_change_to_what_the_state_depends_on_is_refused_naming_the_operator(inputs, kind):
    before, after, what = CHANGES[kind]
    checkpoint = checkpoint_of(before, inputs)
    [operator] = [n.id for n in graph_of(before, inputs).nodes if n.kind == kind]
    with pytest.raises(EngineError) as error:
        restore(after, inputs, checkpoint)
    message = error.value.message
    assert "does not fit this job" in message
    assert f"the state of operator {operator} ({kind}) depends on its " in message
    assert what in message
    assert "new --state-dir" in error.value.hint
    restore(before, inputs, checkpoint)  # the unchanged job resumes


def test_a_change_the_state_does_not_depend_on_is_accepted(inputs):
    checkpoint = checkpoint_of(CHANGES["group_aggregate"][0], inputs)
    # HAVING and the projection are applied to the accumulators when they are read.
    restore("CREATE MATERIALIZED VIEW v AS SELECT auction, COUNT(*) + 1 AS n FROM bids GROUP BY auction "
            "HAVING COUNT(*) > 1;", inputs, checkpoint)


def test_an_operator_whose_state_is_no_longer_in_the_job_is_named(inputs):
    checkpoint = checkpoint_of(CHANGES["group_aggregate"][0], inputs)
    with pytest.raises(EngineError, match=r"operator v\.group_aggregate \(group_aggregate\) has state in the "
                                          r"checkpoint but is no longer in the job"):
        restore("CREATE MATERIALIZED VIEW v AS SELECT auction, price AS n FROM bids;", inputs, checkpoint)


def test_every_operator_with_a_snapshot_declares_its_state():
    for kind, operator in OPERATORS.items():
        has_state = "snapshot" in vars(operator) or any("snapshot" in vars(base) for base in operator.__mro__[1:-2]
                                                        if base.__name__ not in ("Operator", "StateOperator"))
        assert bool(operator.STATE_CONFIG) == has_state, kind

"""Parallel execution: N worker processes give the output of one, and a
savepoint taken at one parallelism restores at another with identical output."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from weir.sql.errors import WeirSqlError

from weir.engine.connectors.registry import create_sink
from weir.engine.operators.base import OperatorContext
from weir.engine.runtime.sink_writer import SinkWriter
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE TABLE bids (auction BIGINT, channel VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'first-event.rate' = '2000', 'splits' = '2'{events});
CREATE TABLE per_auction (auction BIGINT, window_start TIMESTAMP(3), n BIGINT, top BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO per_auction SELECT auction, window_start, COUNT(*), MAX(price)
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '2' SECOND)) GROUP BY auction, window_start, window_end;
CREATE MATERIALIZED VIEW per_channel AS SELECT channel, window_start, COUNT(*) AS n, SUM(price) AS total
FROM TUMBLE(bids, date_time, INTERVAL '5' SECOND) GROUP BY channel, window_start, window_end;
CREATE TABLE cheap (auction BIGINT, price BIGINT) WITH ('connector' = 'filesystem', 'path' = '{cheap}', 'format' = 'csv');
INSERT INTO cheap SELECT auction, price FROM bids WHERE price < 1000;
"""


def run(tmp: Path, parallelism: int, *, events: int | None = 60_000, savepoint: Path | None = None,
        batch_size: int = 2000, on_executor=None, settings: dict | None = None):
    sql = JOB.format(events=f", 'events' = '{events}'" if events else "", out=tmp / "out", cheap=tmp / "cheap")
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": str(batch_size),
                "weir.checkpointing.interval-batches": "5", **(settings or {})}
    script = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings)
    options = JobOptions(state_dir=tmp / "state", from_savepoint=savepoint, on_executor=on_executor)
    return run_job(script.graph, options)


def output(tmp: Path) -> dict[str, list]:
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        views = con.sql("SELECT * FROM per_channel ORDER BY ALL").fetchall()
    finally:
        con.close()
    return {
        "per_channel": views,
        "per_auction": duckdb.sql(f"SELECT * FROM read_csv('{tmp / 'out'}/*.csv') ORDER BY ALL").fetchall(),
        "cheap": duckdb.sql(f"SELECT * FROM read_csv('{tmp / 'cheap'}/*.csv') ORDER BY ALL").fetchall(),
    }


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("p1")
    result = run(tmp, 1)
    return output(tmp), result


@pytest.mark.parametrize("parallelism", [2, 3])
def test_parallel_output_equals_one_worker(tmp_path, straight, parallelism):
    expected, one = straight
    result = run(tmp_path, parallelism)
    assert output(tmp_path) == expected
    assert sorted((p.name for p in (tmp_path / "out").iterdir()))[-1].startswith(f"part-{parallelism - 1}-")
    assert result.rows_read == one.rows_read
    rows_in = {m.id: m.rows_in for m in result.operators}
    assert rows_in == {m.id: m.rows_in for m in one.operators}  # each row handled once, by one worker
    assert result.counter("late_rows_dropped") == one.counter("late_rows_dropped")


def test_window_aggregates_pre_aggregate_before_the_exchange_unless_one_phase(tmp_path, straight):
    """Flink's local-global aggregation: by default the rows of a window aggregate cross the
    exchange as partial aggregates per key and slice; 'ONE_PHASE' sends the rows themselves."""
    expected, one = straight
    two_phase = run(tmp_path / "two", 2)
    one_phase = run(tmp_path / "one", 2, settings={"table.optimizer.agg-phase-strategy": "ONE_PHASE"})
    assert output(tmp_path / "two") == output(tmp_path / "one") == expected
    windows = [m for m in two_phase.operators if m.kind == "window_aggregate"]
    assert len(windows) == 2
    for m in windows:
        assert 0 < m.counters["pre_aggregated_rows"] < m.rows_in
    assert {m.id: m.rows_in for m in two_phase.operators} == {m.id: m.rows_in for m in one.operators}
    assert one_phase.counter("pre_aggregated_rows") == 0
    assert one.counter("pre_aggregated_rows") == 0  # one worker has no exchange to save


@pytest.mark.parametrize("parallelism", [1, 2])
def test_an_unknown_agg_phase_strategy_is_refused(tmp_path, parallelism):
    """Refused when the job is planned (settings are checked at their values), before anything runs."""
    with pytest.raises(WeirSqlError) as raised:
        run(tmp_path, parallelism, settings={"table.optimizer.agg-phase-strategy": "THREE_PHASE"})
    [problem] = raised.value.problems
    assert "'table.optimizer.agg-phase-strategy' must be one of 'AUTO', 'TWO_PHASE', 'ONE_PHASE'" in problem.message
    assert "'THREE_PHASE'" in problem.message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("before", "after"), [(2, 1), (2, 3), (1, 2)])
def test_a_savepoint_restores_at_another_parallelism(tmp_path, straight, before, after):
    """Stop an unbounded job with a savepoint at one parallelism; finish it at another."""
    expected, _ = straight
    from weir.engine.runtime import control

    def ask_for_stop(executor) -> None:
        # The request is picked up at a batch boundary once the job runs.
        (tmp_path / "state" / "control").mkdir(parents=True, exist_ok=True)
        (tmp_path / "state" / "control" / "stop-test.request").write_text('{"kind": "stop", "path": null}')

    first = run(tmp_path, before, events=None, on_executor=ask_for_stop)
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    assert (tmp_path / "state" / "control" / "stop-test.response").exists()
    run(tmp_path, after, savepoint=first.stopped_with.path)
    assert output(tmp_path) == expected
    assert control.running_pid(tmp_path / "state" / "control") is None


def test_regrouping_by_other_keys_gets_a_second_exchange(tmp_path):
    """Per-window ranking over per-auction counts (Nexmark q5's shape): the counts, held by
    the workers owning their auctions, cross to the worker owning their window."""
    sql = """
    CREATE TABLE bids (auction BIGINT, date_time TIMESTAMP(3), WATERMARK FOR date_time AS date_time)
    WITH ('connector' = 'nexmark', 'events' = '20000', 'splits' = '2', 'first-event.rate' = '2000');
    CREATE MATERIALIZED VIEW hot AS SELECT * FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rownum FROM (
        SELECT auction, window_start, window_end, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' SECOND))
        GROUP BY auction, window_start, window_end)) WHERE rownum <= 1;
    """
    views = []
    for parallelism in (1, 2):
        db = tmp_path / f"v{parallelism}.duckdb"
        script = plan_script(parse(sql), db_path=str(db), settings={"parallelism.default": str(parallelism),
                                                                     "weir.source.batch-size": "500"})
        result = run_job(script.graph, JobOptions(state_dir=tmp_path / f"state{parallelism}"))
        assert result.rows_read == 18_400
        con = duckdb.connect(str(db), read_only=True)
        views.append(con.sql("SELECT * FROM hot ORDER BY ALL").fetchall())
        con.close()
    assert len(views[0]) >= 10
    assert views[1] == views[0]


def test_a_workers_duckdb_table_sink_only_stages_and_the_coordinator_commits_once(tmp_path):
    """At parallelism 64 every worker opening the database at start queued on its lock and timed
    out: a worker's sink of a DuckDB table (committed by the coordinator) never opens it."""
    database = tmp_path / "out.duckdb"
    options = {"connector": "duckdb", "path": str(database), "table-name": "t"}
    schema = pa.schema([("k", pa.int64())])
    workers = []
    for subtask in range(2):
        ctx = OperatorContext(operator_id="t.sink", output_schema=schema, subtask_index=subtask, parallelism=2)
        writer = SinkWriter(create_sink(options, schema, subtask_index=subtask), ctx)
        writer.open()
        writer.process_batch(pa.record_batch([pa.array([subtask, subtask + 10])], schema=schema))
        workers.append(writer.sink)
    assert not database.exists(), "a worker opened the database"
    handles = [sink.pre_commit(1) for sink in workers]
    coordinator = create_sink(options, schema)
    coordinator.open()
    coordinator.commit(1, [f for handle in handles for f in handle])
    for sink in workers:
        sink.commit(1)  # forgets its handles: committed elsewhere
    with duckdb.connect(str(database), read_only=True) as con:
        assert con.sql("SELECT k FROM t ORDER BY k").fetchall() == [(0,), (1,), (10,), (11,)]

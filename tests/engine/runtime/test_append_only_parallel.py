"""Interval joins, OVER aggregates and UNION ALL in parallel: N workers give the output of one,
and a savepoint taken at one parallelism restores at another."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE TABLE auction (id BIGINT, seller BIGINT, reserve BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'auction', 'first-event.rate' = '2000', 'splits' = '2', 'events' = '30000');
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', 'first-event.rate' = '2000', 'splits' = '2', 'events' = '30000');

CREATE MATERIALIZED VIEW bids_with_auction AS
SELECT A.id, A.reserve, B.bidder, B.price, B.date_time
FROM auction A LEFT JOIN bid B
ON A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.date_time + INTERVAL '100' MILLISECOND;

CREATE MATERIALIZED VIEW bidder_trend AS
SELECT bidder, date_time, price, AVG(price) OVER w AS avg_price, COUNT(*) OVER w AS n
FROM bid WINDOW w AS (PARTITION BY bidder ORDER BY date_time ROWS BETWEEN 3 PRECEDING AND CURRENT ROW);

CREATE MATERIALIZED VIEW events_per_second AS
WITH events AS (SELECT id AS thing, date_time FROM auction UNION ALL SELECT auction, date_time FROM bid)
SELECT window_start, COUNT(*) AS events, COUNT(DISTINCT thing) AS things
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(date_time), INTERVAL '1' SECOND))
GROUP BY window_start, window_end;

CREATE MATERIALIZED VIEW pricey AS
SELECT id AS thing, reserve AS amount FROM auction WHERE reserve > 50000000
UNION ALL SELECT auction, price FROM bid WHERE price > 50000000;
"""
VIEWS = ("bids_with_auction", "bidder_trend", "events_per_second", "pricey")


def run(tmp: Path, parallelism: int, *, savepoint: Path | None = None, on_executor=None):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "500",
                "weir.checkpointing.interval-batches": "5"}
    script = plan_script(parse(JOB), db_path=str(tmp / "views.duckdb"), settings=settings)
    return run_job(script.graph, JobOptions(state_dir=tmp / "state", from_savepoint=savepoint,
                                            on_executor=on_executor))


def output(tmp: Path) -> dict[str, list]:
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        return {view: con.sql(f"SELECT * FROM {view} ORDER BY ALL").fetchall() for view in VIEWS}
    finally:
        con.close()


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("appendops1")
    result = run(tmp, 1)
    return output(tmp), result


def test_the_job_computes_something(straight):
    views, result = straight
    assert all(len(views[v]) > 10 for v in VIEWS), {v: len(rows) for v, rows in views.items()}
    unmatched = [r for r in views["bids_with_auction"] if r[2] is None]
    assert unmatched and len(unmatched) < len(views["bids_with_auction"])
    assert result.counter("late_rows_dropped") == 0


def test_parallel_equals_one_worker(tmp_path, straight):
    expected, one = straight
    result = run(tmp_path, 2)
    assert output(tmp_path) == expected
    keyed = ("interval_join", "over_aggregate")
    rows_in = {m.id: m.rows_in for m in result.operators if m.id.endswith(keyed)}
    assert rows_in == {m.id: m.rows_in for m in one.operators if m.id.endswith(keyed)}


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 3)])
def test_state_restores_at_another_parallelism(tmp_path, straight, before, after):
    expected, _ = straight

    def ask_for_stop(executor) -> None:
        (tmp_path / "state" / "control").mkdir(parents=True, exist_ok=True)
        (tmp_path / "state" / "control" / "stop-test.request").write_text('{"kind": "stop", "path": null}')

    first = run(tmp_path, before, on_executor=ask_for_stop)
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    run(tmp_path, after, savepoint=first.stopped_with.path)
    assert output(tmp_path) == expected

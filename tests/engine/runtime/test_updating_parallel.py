"""Updating streams in parallel: GROUP BY without a window, regular, lookup and temporal joins,
Top-N without a window — N workers exchanging rows give the views of one, and a checkpoint
taken at one parallelism restores at another."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

OPTIONS = "'first-event.rate' = '2000', 'splits' = '2', 'events' = '30000'"
JOB = f"""
CREATE TABLE person (id BIGINT, state VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'person', {OPTIONS});
CREATE TABLE auction (id BIGINT, seller BIGINT, category BIGINT, date_time TIMESTAMP(3), expires TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'auction', {OPTIONS});
CREATE TABLE bid (auction BIGINT, bidder BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', {OPTIONS});

-- a GROUP BY over a regular join, then a GROUP BY over that (Nexmark q4's shape)
CREATE MATERIALIZED VIEW avg_final AS
SELECT category, COUNT(*) AS auctions, MAX(final) AS top FROM (
  SELECT A.id, A.category, MAX(B.price) AS final FROM auction A, bid B
  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires GROUP BY A.id, A.category)
GROUP BY category;

-- an outer join, and the sellers without a person (an anti join)
CREATE MATERIALIZED VIEW sellers AS
SELECT A.id, P.state FROM auction A LEFT JOIN person P ON A.seller = P.id AND P.state <> 'OR';

-- Top-N without a window, keyed by (auction, rank)
CREATE MATERIALIZED VIEW top2 AS
SELECT auction, bidder, price, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 2;

-- an event-time temporal join: each bid with its auction's version at the bid's time
CREATE MATERIALIZED VIEW with_category AS
SELECT B.auction, B.price, A.category FROM bid B
JOIN auction FOR SYSTEM_TIME AS OF B.date_time AS A ON B.auction = A.id;
"""
VIEWS = ("avg_final", "sellers", "top2", "with_category")


def run(tmp: Path, parallelism: int, *, savepoint: Path | None = None, on_executor=None):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "700",
                "weir.checkpointing.interval-batches": "4"}
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
def single(tmp_path_factory) -> dict[str, list]:
    tmp = tmp_path_factory.mktemp("p1")
    run(tmp, 1)
    views = output(tmp)
    assert all(views[v] for v in VIEWS), {v: len(rows) for v, rows in views.items()}
    return views


@pytest.mark.parametrize("parallelism", [2, 3])
def test_n_workers_give_the_views_of_one(single, tmp_path, parallelism):
    run(tmp_path, parallelism)
    assert output(tmp_path) == single


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 3)])
def test_state_restores_at_another_parallelism(single, tmp_path, before, after):
    def ask_for_stop(executor) -> None:  # stop with a savepoint at the first boundary
        (tmp_path / "state" / "control").mkdir(parents=True, exist_ok=True)
        (tmp_path / "state" / "control" / "stop-test.request").write_text('{"kind": "stop", "path": null}')

    first = run(tmp_path, before, on_executor=ask_for_stop)
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    run(tmp_path, after, savepoint=first.stopped_with.path)
    assert output(tmp_path) == single

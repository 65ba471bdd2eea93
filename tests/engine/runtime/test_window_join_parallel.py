"""Window joins in parallel: N workers give the output of one, and a savepoint taken at one
parallelism restores at another. The job is Nexmark q8 (new sellers; persons grouped by id
alone here, and by (id, name) as in the suite below) plus an outer and an anti join of bids with auctions, so that unmatched rows cross key groups too."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

JOB = """
CREATE TABLE person (id BIGINT, name VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'person', 'first-event.rate' = '2000', 'splits' = '2'{events});
CREATE TABLE auction (id BIGINT, seller BIGINT, reserve BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'auction', 'first-event.rate' = '2000', 'splits' = '2'{events});
CREATE TABLE bid (auction BIGINT, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid', 'first-event.rate' = '2000', 'splits' = '2'{events});

CREATE MATERIALIZED VIEW new_sellers AS
SELECT P.id, P.name, P.starttime
FROM (SELECT id, MAX(name) AS name, window_start AS starttime, window_end AS endtime
      FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(date_time), INTERVAL '2' SECOND))
      GROUP BY id, window_start, window_end) P
JOIN (SELECT seller, window_start AS starttime, window_end AS endtime
      FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '2' SECOND))
      GROUP BY seller, window_start, window_end) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;

CREATE MATERIALIZED VIEW bids_and_auctions AS
SELECT B.auction, B.price, A.reserve, COALESCE(B.window_start, A.window_start) AS window_start
FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND)) B
FULL JOIN TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '1' SECOND)) A
ON B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end;

CREATE MATERIALIZED VIEW auctions_without_bids AS
SELECT id, seller, window_start FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(date_time), INTERVAL '1' SECOND)) A
WHERE NOT EXISTS (SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(date_time), INTERVAL '1' SECOND)) B
                  WHERE B.auction = A.id AND B.window_start = A.window_start AND B.window_end = A.window_end);
"""
VIEWS = ("new_sellers", "bids_and_auctions", "auctions_without_bids")


def run(tmp: Path, parallelism: int, *, events: int = 30_000, savepoint: Path | None = None,
        on_executor=None):
    sql = JOB.format(events=f", 'events' = '{events}'")
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "500",
                "weir.checkpointing.interval-batches": "5"}
    script = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings)
    options = JobOptions(state_dir=tmp / "state", from_savepoint=savepoint, on_executor=on_executor)
    return run_job(script.graph, options)


def output(tmp: Path) -> dict[str, list]:
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        return {view: con.sql(f"SELECT * FROM {view} ORDER BY ALL").fetchall() for view in VIEWS}
    finally:
        con.close()


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("join1")
    result = run(tmp, 1)
    return output(tmp), result


def test_the_job_joins_something(straight):
    views, _ = straight
    assert all(views[v] for v in VIEWS), {v: len(rows) for v, rows in views.items()}
    unmatched = [r for r in views["bids_and_auctions"] if r[0] is None or r[2] is None]
    assert unmatched and len(unmatched) < len(views["bids_and_auctions"])


@pytest.mark.parametrize("parallelism", [2, 3])
def test_parallel_window_joins_equal_one_worker(tmp_path, straight, parallelism):
    expected, one = straight
    result = run(tmp_path, parallelism)
    assert output(tmp_path) == expected
    def joined(r) -> dict[str, int]:
        return {m.id: m.rows_in for m in r.operators if m.id.endswith(".window_join")}

    assert len(joined(one)) == 3
    assert joined(result) == joined(one)  # each row joined once, by one worker


@pytest.mark.parametrize(("before", "after"), [(2, 1), (1, 3)])
def test_join_state_restores_at_another_parallelism(tmp_path, straight, before, after):
    """A job stopped with a savepoint at one parallelism, finished at another."""
    expected, _ = straight

    def ask_for_stop(executor) -> None:
        (tmp_path / "state" / "control").mkdir(parents=True, exist_ok=True)
        (tmp_path / "state" / "control" / "stop-test.request").write_text('{"kind": "stop", "path": null}')

    first = run(tmp_path, before, on_executor=ask_for_stop)
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    run(tmp_path, after, savepoint=first.stopped_with.path)
    assert output(tmp_path) == expected


def test_an_input_keyed_by_other_columns_than_the_join_is_exchanged_again(tmp_path):
    """Nexmark q8 as the suite writes it: persons grouped by (id, name), joined on id."""
    q8 = JOB.replace("SELECT id, MAX(name) AS name,", "SELECT id, name,").replace(
        "GROUP BY id, window_start", "GROUP BY id, name, window_start")
    views = []
    for parallelism in (1, 2):
        tmp = tmp_path / f"p{parallelism}"
        settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "500"}
        script = plan_script(parse(q8.format(events=", 'events' = '20000'")), db_path=str(tmp / "views.duckdb"),
                             settings=settings)
        run_job(script.graph, JobOptions(state_dir=tmp / "state"))
        views.append(output(tmp)["new_sellers"])
    assert views[0]
    assert views[1] == views[0]

"""Jobs from Python: submit, metrics, savepoint, stop, weir.run."""
from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import pytest

import weir
from weir.engine.errors import EngineError
from weir.shell import render
from weir.sql.errors import WeirSqlError

from api_data import NEXMARK, WINDOWS, bids_table, oracle

#: Bids per auction and 10 s window over nexmark bids into a result table and a csv file.
SCRIPT = NEXMARK.format(events="'events' = '3000', ") + """
CREATE TABLE top_prices (auction BIGINT, price BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/top', 'format' = 'csv');
INSERT INTO top_prices SELECT auction, price FROM bids WHERE price > 10000000;
""" + WINDOWS + ";\n"


def view_rows(db: str) -> list[tuple]:
    """The rows of the view WINDOWS in the database ``db``."""
    with duckdb.connect(db, read_only=True) as con:
        return con.sql("SELECT * FROM per_auction ORDER BY window_start, auction").fetchall()


def test_submit_runs_a_script_file_as_one_job(con, tmp_path):
    path = tmp_path / "windows.sql"
    path.write_text(SCRIPT)
    job = con.submit(path)
    assert job.name == "windows"
    assert job.wait(120) == "FINISHED"
    result = job.result
    bids = sum(m.rows_out for m in result.operators if m.id == "bids.source")
    assert bids == result.rows_read > 0
    # Both statements ran in the one job: its two sinks.
    sinks = {m.id for m in result.operators if m.kind == "sink"}
    assert sinks == {"top_prices.sink", "per_auction.sink"}
    rows = con.sql("SELECT SUM(bids) FROM per_auction").fetchall()
    assert rows == [(bids,)]
    # The tables the script declared joined the connection's catalog.
    assert ("bids", "nexmark") in con.sql("SHOW TABLES").fetchall()


def test_metrics_count_rows_per_operator_and_late_rows(con):
    # The bid at 1 s arrives after the watermark reached 12 s - 2 s: its window [0, 10) has fired.
    rows = [(1, 10, 0), (2, 30, 2), (1, 50, 12), (1, 20, 1), (2, 60, 21)]
    con.register("bids", bids_table(rows), watermark="date_time - INTERVAL '2' SECOND")
    con.execute("SET 'weir.checkpointing.interval-batches' = '1'")
    job = con.submit(WINDOWS)
    assert job.wait(60) == "FINISHED"
    metrics = job.metrics()
    by_id = {m.id: m for m in metrics.operators}
    assert by_id["bids.source"].rows_out == 5
    assert by_id["per_auction.window_aggregate"].rows_in == 5
    assert by_id["per_auction.window_aggregate"].late_rows == 1
    assert by_id["per_auction.window_aggregate"].rows_out == by_id["per_auction.sink"].rows_in == 4
    assert metrics.late_rows == 1 and metrics.rows_in == 5 and metrics.rows_out == 4
    assert metrics.last_checkpoint == str(job.result.checkpoints[-1].checkpoint_id)
    assert metrics.watermark > 0
    assert con.sql("SELECT SUM(bids) FROM per_auction").fetchall() == [(4,)]


def test_savepoint_stop_and_resume(con, tmp_path):
    script = tmp_path / "unbounded.sql"  # runs until stopped
    script.write_text(NEXMARK.format(events="") + "SET 'execution.checkpointing.interval' = '100ms';\n" + WINDOWS)
    job = con.submit(script)
    taken = job.savepoint(tmp_path / "sp1")
    assert Path(taken, "_metadata").is_file()
    assert job.status == "RUNNING"
    stopped_at = job.stop(savepoint=True)
    assert job.status == "STOPPED" and Path(stopped_at, "_metadata").is_file()
    assert job.result.stopped_with is not None

    # The same script from the savepoint maintains the view again (the shell's recipe).
    again = con.submit(script, from_savepoint=stopped_at)
    assert again.status == "RUNNING"
    assert again.stop(savepoint=False) is None
    assert again.status == "CANCELED"


def test_an_iterator_job_takes_no_savepoint(con):
    gate = threading.Event()

    def batches():
        yield from bids_table().to_batches()
        gate.wait(60)  # the job stays running until the test lets it end

    con.register("bids", batches(), watermark="date_time")
    job = con.submit(WINDOWS)
    try:
        with pytest.raises(EngineError, match="cannot be rewound") as caught:
            job.savepoint()
        assert "pyarrow.Table" in caught.value.hint
        assert job.status == "RUNNING"
    finally:
        gate.set()
    assert job.wait(60) == "FINISHED"


def test_weir_run_runs_to_the_end_like_weir_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("windows.sql").write_text(SCRIPT)
    result = weir.run("windows.sql", db="results.duckdb")
    assert result.name == "windows" and not result.already_finished and result.rows_read > 0
    assert Path(".weir/windows/checkpoints").is_dir()  # `weir run`'s state directory
    first = view_rows("results.duckdb")
    assert sum(row[2] for row in first) == result.rows_read

    # Finished: a second run runs nothing and says so; fresh=True runs it again, to the same rows.
    again = weir.run("windows.sql", db="results.duckdb")
    assert again.already_finished and "had already finished" in again.finished_before
    fresh = weir.run("windows.sql", db="results.duckdb", fresh=True)
    assert not fresh.already_finished and fresh.rows_read == result.rows_read
    assert view_rows("results.duckdb") == first


def test_weir_run_takes_sql_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = weir.run(SCRIPT, db="results.duckdb", name="inline")
    assert result.name == "inline" and Path(".weir/inline/checkpoints").is_dir()
    assert sum(row[2] for row in view_rows("results.duckdb")) == result.rows_read


def test_a_parallel_jobs_metrics_sum_its_workers(con):
    con.execute(NEXMARK.format(events="'events' = '3000', 'splits' = '2', "))
    con.execute("SET 'parallelism.default' = '2'")
    job = con.submit(WINDOWS)
    assert job.wait(300) == "FINISHED"
    by_id = {m.id: m for m in job.metrics().operators}
    assert by_id["bids.source"].rows_out == job.result.rows_read > 0
    assert by_id["per_auction.window_aggregate"].rows_in == job.result.rows_read
    assert con.sql("SELECT CAST(SUM(bids) AS BIGINT) FROM per_auction").fetchall() == [(job.result.rows_read,)]


def held_bids(gate: threading.Event, rows=None):
    """The bids as an iterator that, after its batches, waits for ``gate``: a job over it runs
    until the test lets it end."""
    def batches():
        yield from bids_table(rows).to_batches(max_chunksize=2) if rows else bids_table().to_batches(max_chunksize=2)
        gate.wait(60)
    return batches()


def test_wait_with_a_timeout_raises_while_the_job_runs_and_metrics_are_live(con):
    """While the job runs: wait(timeout) raises TimeoutError (the job goes on), metrics() shows
    the rows read so far and the latest checkpoint, and con.sql the rows a checkpoint committed:
    the counts of the bids of some whole batches (batches of 2), never of part of one."""
    gate = threading.Event()
    con.register("bids", held_bids(gate), schema=bids_table().schema, watermark="date_time")
    con.execute("SET 'weir.checkpointing.interval-batches' = '1'")
    job = con.submit("CREATE MATERIALIZED VIEW counts AS SELECT auction, COUNT(*) AS bids FROM bids GROUP BY auction")
    prefixes = [oracle(bids_table()[:n], "SELECT auction, COUNT(*) FROM bids GROUP BY auction ORDER BY auction")
                for n in (2, 4, 6)]
    try:
        with pytest.raises(TimeoutError, match="still running"):
            job.wait(0.05)
        assert job.status == "RUNNING"
        running = job._job
        with running.changed:  # the guard is against a hang, not a measure
            # A checkpoint and the progress of the rows read reach the handle as separate events.
            assert running.changed.wait_for(
                lambda: running.metrics.last_checkpoint != "-" and running.metrics.rows_in > 0, 60), job.metrics()
        metrics = job.metrics()
        assert job.status == "RUNNING" and metrics.rows_in in (2, 4, 6) and int(metrics.last_checkpoint) >= 1
        assert "bids.source" in {m.id for m in metrics.operators}  # per operator while it runs
        assert con.sql("SELECT * FROM counts ORDER BY auction").fetchall() in prefixes
    finally:
        gate.set()
    assert job.wait(60) == "FINISHED"
    assert con.sql("SELECT * FROM counts ORDER BY auction").fetchall() == prefixes[-1]


def test_a_scripts_sql_error_names_its_file_line_and_column(con, tmp_path):
    path = tmp_path / "broken.sql"
    path.write_text("CREATE TABLE t (x BIGINT) WITH ('connector' = 'nexmark');\n"
                    "CREATE TABLE out (x BIGINT) WITH ('connector' = 'blackhole');\nINSERT INTO out SELECT nope FROM t;\n")
    with pytest.raises(WeirSqlError) as caught:
        con.submit(path)
    error = caught.value
    assert (error.line, error.column) == (3, 24) and "nope" in error.message and error.hint
    assert error.source_name == str(path)
    assert f"{path}:3:24" in render.sql_error(error, error.text, error.source_name)  # as the shell shows it


def test_a_failing_jobs_error_names_its_operator(con):
    con.register("bids", bids_table(), watermark="date_time")
    con.create_function("broken", lambda price: 1 // (price - price), result_type="BIGINT")
    job = con.submit("CREATE MATERIALIZED VIEW b AS SELECT broken(price) AS x FROM bids")
    with pytest.raises(EngineError) as caught:
        job.wait(60)
    assert caught.value.operator_id == "b.calc" and "broken failed on the row (10)" in caught.value.message
    assert "ZeroDivisionError" in caught.value.message and "traceback" in caught.value.hint

"""The shell's session without a terminal: statements in, replies out."""
from __future__ import annotations

from pathlib import Path

import pytest

from jobs import nexmark_source
from weir.shell.jobs import FINISHED, STOPPED
from weir.shell.session import LiveQuery, Message, ResultTable
from sessions import BIDS, run
from weir.sql.errors import WeirSqlError

PER_CHANNEL = ("CREATE MATERIALIZED VIEW per_channel AS SELECT channel, window_start, window_end, COUNT(*) AS n "
               "FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND) GROUP BY channel, window_start, window_end;")




def rows(reply) -> list[dict]:
    assert isinstance(reply, ResultTable), reply
    return reply.table.to_pylist()


def test_a_view_queried_while_its_job_commits(session):
    run(session, BIDS + nexmark_source(200_000))
    started = run(session, PER_CHANNEL)
    assert started.text.startswith("job j1 started: materialized view per_channel")
    job = session.jobs.get("j1")
    answers = 0
    while job.running:  # query as fast as we can: some queries meet the commit
        total = rows(run(session, "SELECT COALESCE(SUM(n), 0) AS total FROM per_channel;"))[0]["total"]
        assert total in (0, 184_000)  # never half a commit
        answers += 1
    job.thread.join()
    assert job.status == FINISHED and answers > 0, job.error
    assert rows(run(session, "SELECT SUM(n) AS total FROM per_channel;")) == [{"total": 184_000}]


def test_show_describe_set_reset_and_explain(session):
    run(session, BIDS + nexmark_source(100))
    assert rows(run(session, "SHOW TABLES;")) == [{"table name": "bids", "connector": "nexmark"}]
    described = rows(run(session, "DESCRIBE bids;"))
    assert described[4] == {"name": "date_time", "type": "TIMESTAMP(3) *ROWTIME*", "null": "TRUE", "key": "",
                            "watermark": "date_time - INTERVAL '2' SECOND"}
    assert run(session, "SET;").text == "nothing is set: every setting has its default"
    run(session, "SET 'sql-client.execution.result-mode' = 'changelog';")
    assert rows(run(session, "SET;")) == [{"key": "sql-client.execution.result-mode", "value": "changelog"}]
    assert session.result_mode() == "changelog"
    run(session, "RESET 'sql-client.execution.result-mode';")
    assert session.result_mode() == "table"
    explained = run(session, "EXPLAIN SELECT auction FROM bids;")
    assert explained.text.startswith("== EXPLAIN at line 1: SELECT auction FROM bids ==")
    run(session, "CREATE VIEW cheap AS SELECT auction, price FROM bids WHERE price < 100;")
    assert rows(run(session, "DESCRIBE cheap;")) == [{"name": "auction", "type": "BIGINT"},
                                                     {"name": "price", "type": "BIGINT"}]


def test_errors_point_at_what_they_name(session):
    run(session, BIDS + nexmark_source(100))
    with pytest.raises(WeirSqlError) as error:
        run(session, "SET 'sql-client.execution.result-mode' = 'grid';")
    assert error.value.problems[0].message == "unknown result mode 'grid'"
    assert (error.value.line, error.value.col) == (1, 42)
    with pytest.raises(WeirSqlError, match="unknown table or view `bid`"):
        run(session, "DESCRIBE bid;")
    with pytest.raises(WeirSqlError, match="`bids` is a table") as error:
        run(session, "DROP VIEW bids;")
    assert error.value.hint == "use DROP TABLE"
    with pytest.raises(WeirSqlError, match="no job with id 'j7'"):
        run(session, "STOP JOB 'j7';")
    with pytest.raises(WeirSqlError, match="SHOW MODULES statements are not supported"):
        run(session, "SHOW MODULES;")


def test_drop_refuses_a_view_whose_job_runs_then_drops_its_table(session):
    run(session, BIDS + "WITH ('connector' = 'nexmark');")  # unbounded
    run(session, PER_CHANNEL)
    with pytest.raises(WeirSqlError, match="job j1 maintains the materialized view `per_channel`") as error:
        run(session, "DROP VIEW per_channel;")
    assert error.value.hint == "stop it first: STOP JOB 'j1'"
    assert run(session, "STOP JOB 'j1';").text.startswith("job j1 stopped (CANCELED)")
    assert run(session, "DROP VIEW per_channel;").text == "dropped view per_channel"
    assert "per_channel" not in session.database_tables()
    assert run(session, "DROP VIEW IF EXISTS per_channel;").text == "no view per_channel: nothing dropped"
    assert run(session, "DROP TABLE bids;").text == "dropped table bids"
    assert rows(run(session, "SHOW TABLES;")) == []


def test_stop_with_savepoint_then_resume_from_it(session, tmp_path):
    """STOP JOB ... WITH SAVEPOINT takes a real savepoint; SET 'execution.savepoint.path'
    starts the same statement from it, and the output ends as an uninterrupted run's would."""
    # Unbounded and held to 2,000 events a second of wall time, so that however slowly the STOP
    # comes on a loaded machine, the savepoint is well inside the 200,000 events read after it.
    run(session, BIDS + "WITH ('connector' = 'nexmark', 'first-event.rate' = '1000', 'rate' = '2000');")
    run(session, f"CREATE TABLE counts (channel VARCHAR, n BIGINT) WITH ('connector' = 'filesystem', "
                 f"'path' = '{tmp_path / 'counts'}', 'format' = 'csv');")
    insert = ("INSERT INTO counts SELECT channel, COUNT(*) FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND) "
              "GROUP BY channel, window_start, window_end;")
    run(session, insert)
    reply = run(session, "STOP JOB 'j1' WITH SAVEPOINT;")
    assert reply.text.startswith("job j1 stopped with a savepoint at ")
    path = reply.text.split(" at ", 1)[1].split(";")[0]
    assert (Path(path) / "_metadata").exists()
    assert session.jobs.get("j1").status == STOPPED
    assert run(session, "STOP JOB 'j1';").text == "job j1 is not running: it is STOPPED"
    run(session, "DROP TABLE bids;")
    run(session, BIDS + nexmark_source(200_000))  # the same source, now bounded
    run(session, f"SET 'execution.savepoint.path' = '{path}';")
    run(session, insert)
    session.jobs.get("j2").thread.join()
    assert session.jobs.get("j2").status == FINISHED
    total = rows(run(session, f"SELECT SUM(n) AS total FROM read_csv('{tmp_path / 'counts'}/*.csv');"))[0]["total"]
    assert total == 184_000  # every bid of the 200,000 events, none twice


def test_a_select_reads_a_stream_live_or_the_database_at_once(session):
    run(session, BIDS + nexmark_source(2000))
    live = run(session, "SELECT auction, price FROM bids WHERE price > 90000000;")
    assert isinstance(live, LiveQuery) and live.mode == "table"
    live.job.thread.join()
    assert live.job.status == FINISHED and live.result.received > 0
    assert live.result.rows(0, 1)[0][1].startswith("9")
    assert rows(run(session, "SELECT 41 + 1 AS answer;")) == [{"answer": 42}]
    run(session, PER_CHANNEL)
    session.jobs.get("j2").thread.join()
    direct = run(session, "SELECT SUM(n) AS n FROM per_channel;")
    assert rows(direct) == [{"n": 1840}]
    assert isinstance(run(session, "SHOW JOBS;"), ResultTable)
    assert isinstance(run(session, "CREATE VIEW v AS SELECT auction FROM bids;"), Message)
    assert isinstance(run(session, "SELECT * FROM v;"), LiveQuery)  # a plain view reads the stream


def test_a_live_group_by_shows_its_changes_and_the_table_they_leave(session, tmp_path):
    """An updating SELECT: the changelog view shows each change's kind, and the table
    view holds what the changes leave, which is the batch GROUP BY over the same rows."""
    csv = tmp_path / "bids.csv"
    csv.write_text("auction,bidder,price,channel,date_time\n" + "".join(
        f"{i % 3},{i},{i * 7 % 11},c{i % 2},2024-01-01 00:00:{i:02d}\n" for i in range(20)))
    run(session, BIDS + f"WITH ('connector' = 'filesystem', 'path' = '{csv}', 'format' = 'csv');")
    run(session, "SET 'weir.source.batch-size' = '3';")
    live = run(session, "SELECT auction, COUNT(*) AS n, MAX(price) AS top FROM bids GROUP BY auction;")
    live.job.thread.join()
    assert live.job.status == FINISHED, live.job.error
    result = live.result
    assert result.names == ["auction", "n", "top"]
    kinds = {row[0] for row in result.changes(0, result.received)}
    assert kinds == {"+I", "-U", "+U"}
    import duckdb

    batch = duckdb.sql(f"SELECT auction::VARCHAR, COUNT(*)::VARCHAR, MAX(price)::VARCHAR FROM read_csv('{csv}') "
                       "GROUP BY auction").fetchall()
    assert sorted(map(tuple, result.current_rows(0, result.current_count()))) == sorted(batch)


def test_the_stop_with_savepoint_recipe_resumes_a_view_as_printed_and_keeps_its_rows(session):
    """STOP JOB ... WITH SAVEPOINT prints a recipe; typed as printed it maintains the same
    materialized view again from the savepoint, keeping the rows it had, and the savepoint
    path is used up by that one job."""
    # Unbounded and held to 2,000 events a second of wall time, so that however slowly the STOP
    # comes on a loaded machine, the savepoint is well inside the 200,000 events read after it.
    run(session, BIDS + "WITH ('connector' = 'nexmark', 'first-event.rate' = '1000', 'rate' = '2000');")
    run(session, "SET 'weir.checkpointing.interval-batches' = '1';")
    run(session, PER_CHANNEL)
    reply = run(session, "STOP JOB 'j1' WITH SAVEPOINT;")
    assert reply.text.startswith("job j1 stopped with a savepoint at ")
    recipe = reply.text.split("resume it with ", 1)[1]
    set_statement, rest = recipe.split(";", 1)
    assert rest == " and the same statement"
    before = rows(run(session, "SELECT * FROM per_channel ORDER BY channel, window_start;"))
    run(session, "DROP TABLE bids;")
    run(session, BIDS + nexmark_source(200_000))  # the same source, now bounded
    run(session, set_statement + ";")
    started = run(session, PER_CHANNEL)
    assert started.text.startswith("job j2 started: materialized view per_channel")
    assert "resuming from the savepoint" in started.text
    job = session.jobs.get("j2")
    job.thread.join()
    assert job.status == FINISHED, job.error
    after = rows(run(session, "SELECT * FROM per_channel ORDER BY channel, window_start;"))
    kept = {tuple(row.values()) for row in after}
    assert all(tuple(row.values()) in kept for row in before)  # the rows the view had are kept
    assert rows(run(session, "SELECT SUM(n) AS total, COUNT(*) = COUNT(DISTINCT (channel, window_start)) AS once "
                             "FROM per_channel;")) == [{"total": 184_000, "once": True}]
    assert "execution.savepoint.path" not in session.settings  # one job, not every later one
    run(session, "CREATE TABLE again (n BIGINT) WITH ('connector' = 'blackhole');")
    assert "resuming" not in run(session, "INSERT INTO again SELECT price FROM bids;").text


def test_shell_jobs_run_at_the_configured_parallelism_with_the_restart_strategy(session, tmp_path, inject_fault):
    """The shell runs a job as `weir run` does: 'parallelism.default' gives N workers (one
    part file per worker), and a failure restarts the job per the restart strategy."""
    from weir.engine import faults
    from weir.engine.runtime.parallel import ProcessExecutor

    run(session, BIDS + nexmark_source(4000))
    query = "SELECT channel, COUNT(*) FROM TUMBLE(bids, date_time, INTERVAL '10' SECOND) GROUP BY channel, window_start, window_end;"
    for name in ("p2", "p1"):
        run(session, f"CREATE TABLE {name} (channel VARCHAR, n BIGINT) WITH ('connector' = 'filesystem', "
                     f"'path' = '{tmp_path / name}', 'format' = 'csv');")
    run(session, "SET 'parallelism.default' = '2';")
    run(session, f"INSERT INTO p2 {query}")
    parallel = session.jobs.get("j1")
    parallel.thread.join()
    assert parallel.status == FINISHED, parallel.error
    assert isinstance(parallel.executor, ProcessExecutor)
    assert {p.name.split("-")[1] for p in (tmp_path / "p2").iterdir() if p.name.startswith("part-")} == {"0", "1"}

    run(session, "RESET 'parallelism.default';")
    run(session, "SET 'weir.source.batch-size' = '500';")
    run(session, "SET 'restart-strategy.type' = 'fixed-delay';")
    run(session, "SET 'restart-strategy.fixed-delay.delay' = '0s';")
    inject_fault(("batch", 3, True))  # the first attempt fails at its 3rd batch
    run(session, f"INSERT INTO p1 {query}")
    restarted = session.jobs.get("j2")
    restarted.thread.join()
    assert restarted.status == FINISHED, restarted.error
    assert faults._counts["batch"] > 3  # it failed once, then ran on
    total = "SELECT channel, SUM(n) AS n FROM read_csv('{}/*.csv') GROUP BY channel ORDER BY channel"
    assert run(session, total.format(tmp_path / "p1") + ";").table == run(session, total.format(tmp_path / "p2") + ";").table


def test_show_jobs_reads_each_jobs_own_metrics_snapshot_while_it_runs_and_after(session):
    """SHOW JOBS reads a snapshot the job's thread publishes (never the executor's tasks):
    while the job runs its figures only grow, and at its end they are the job's totals."""
    from weir.shell.jobs import JobMetrics

    run(session, BIDS + nexmark_source(20_000))
    run(session, "SET 'weir.source.batch-size' = '1000';")
    run(session, "SET 'weir.checkpointing.interval-batches' = '2';")
    run(session, PER_CHANNEL)
    job = session.jobs.get("j1")
    seen = []
    while job.running:
        snapshot = job.metrics
        assert isinstance(snapshot, JobMetrics)
        seen.append((snapshot.rows_in, snapshot.rows_out))
        listed = rows(run(session, "SHOW JOBS;"))[0]
        assert listed["rows in"] >= snapshot.rows_in and listed["rows out"] >= snapshot.rows_out
    job.thread.join()
    assert job.status == FINISHED, job.error
    assert seen == sorted(seen)  # never backwards
    (listed,) = rows(run(session, "SHOW JOBS;"))
    windows = rows(run(session, "SELECT COUNT(*) AS n FROM per_channel;"))[0]["n"]
    assert (listed["rows in"], listed["rows out"]) == (18_400, windows)
    assert listed["last checkpoint"] == job.result.checkpoints[-1].checkpoint_id  # a number

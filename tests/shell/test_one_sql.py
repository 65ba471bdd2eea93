"""One shell speaks one SQL: a query the result database answers means what a streaming query means."""
from __future__ import annotations

import pytest

from weir.shell.jobs import FINISHED
from weir.shell.session import ResultTable
from sessions import BIDS, run
from weir.sql.errors import WeirSqlError





def rows(reply) -> list[dict]:
    assert isinstance(reply, ResultTable), reply
    return reply.table.to_pylist()


def test_one_sql_over_a_stream_and_over_a_result_table(session, tmp_path):
    """A query the database answers (over a materialized view) means what a streaming query means:
    integer '/' divides as integers, and unnamed columns are Flink's EXPR$n in both."""
    csv = tmp_path / "bids.csv"
    csv.write_text("auction,bidder,price,channel,date_time\n" + "".join(
        f"{i % 3},{i},{i * 7 % 11},c{i % 2},2024-01-01 00:00:{i:02d}\n" for i in range(20)))
    run(session, BIDS + f"WITH ('connector' = 'filesystem', 'path' = '{csv}', 'format' = 'csv');")
    run(session, "CREATE MATERIALIZED VIEW totals AS SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction;")
    session.jobs.get("j1").thread.join()
    assert rows(run(session, "SELECT 7 / 2, MAX(n) / 2, -7 / 2, 7.0 / 2, COUNT(*) FROM totals;")) == [
        {"EXPR$0": 3, "EXPR$1": 3, "EXPR$2": -3, "EXPR$3": 3.5, "EXPR$4": 3}]
    typed = rows(run(session, "SELECT CAST(n / 2.0 AS INT) AS half, ROUND(CAST(n AS DOUBLE) / 20, 1) AS q, "
                              "CAST(-n / 2.0 AS BIGINT) AS neg FROM totals WHERE auction = 0;"))
    assert typed == [{"half": 3, "q": 0.4, "neg": -3}]  # n = 7: 3.5 and -3.5 truncated, 0.35 rounded half up
    with pytest.raises(WeirSqlError) as error:  # the streaming query's errors, not DuckDB's
        run(session, "SELECT foo_bar(n), n + 'x' FROM totals;")
    assert [(p.message, p.col) for p in error.value.problems] == [
        ("unknown function FOO_BAR", 8), ("the operator + cannot take BIGINT and VARCHAR: n + 'x'", 22)]
    live = run(session, "SELECT 7 / 2, price / 2, -7 / 2 FROM bids WHERE bidder = 3;")
    live.job.thread.join()
    assert live.job.status == FINISHED, live.job.error
    assert live.result.names == ["EXPR$0", "EXPR$1", "EXPR$2"]
    assert [tuple(row) for row in live.result.current_rows(0, live.result.current_count())] == [("3", "5", "-3")]

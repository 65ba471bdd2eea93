"""`weir run`: the summary of a finished job, and SQL errors rendered for a person."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import duckdb

from cli_jobs import BIDS, ISSUE_JOB


def summary_rows(out: str) -> dict[str, list[str]]:
    """operator id -> [rows in, rows out, late dropped], from the summary table."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) == 4 and "." in cells[0]:
            rows[cells[0]] = cells[1:]
    return rows


def test_run_prints_the_summary_and_exits_0(weir, tmp_path):
    Path("job.sql").write_text(ISSUE_JOB)
    result = weir("run", "job.sql", "--db", "results.duckdb")
    assert result.code == 0, result.err
    assert re.search(r"^job job finished in \d+\.\d\d s: 18,400 events read, [\d,]+ events/s$", result.out, re.M)
    rows = summary_rows(result.out)
    assert rows["bids.source"] == ["-", "18,400", "-"]
    assert rows["auction_counts.window_aggregate"][0] == "18,400"
    assert rows["channel_minutes.window_aggregate"][0] == "18,400"
    assert rows["auction_counts.window_aggregate"][2] == rows["channel_minutes.window_aggregate"][2] == "0"
    assert "late rows dropped: 0; malformed rows skipped: 0" in result.out
    assert "materialized views in results.duckdb: channel_minutes" in result.out

    # The counts agree with what the sinks wrote.
    minutes = int(rows["channel_minutes.window_aggregate"][1].replace(",", ""))
    assert rows["channel_minutes.sink"] == [f"{minutes:,}", "-", "-"]
    with duckdb.connect("results.duckdb", read_only=True) as con:
        assert con.execute("SELECT COUNT(*), SUM(bids) FROM channel_minutes").fetchone() == (minutes, 18_400)
    written = [row for part in sorted((tmp_path / "out/auction_counts").rglob("*.csv"))
               for row in list(csv.reader(part.open()))[1:]]
    assert f"{len(written):,}" == rows["auction_counts.window_aggregate"][1] == rows["auction_counts.sink"][0]


LATE_JOB = """\
SET 'weir.source.batch-size' = '1';
CREATE TABLE clicks (user_id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'filesystem', 'path' = 'clicks.csv', 'format' = 'csv');
CREATE MATERIALIZED VIEW per_user AS
SELECT user_id, window_start, COUNT(*) AS clicks
FROM TUMBLE(clicks, ts, INTERVAL '10' SECOND)
GROUP BY user_id, window_start, window_end;
"""
CLICKS = """\
user_id,ts
1,2024-01-01 00:00:01
1,2024-01-01 00:00:03
2,2024-01-01 00:00:12
1,2024-01-01 00:00:04
2,2024-01-01 00:00:25
"""


def test_run_counts_late_rows_dropped(weir):
    Path("late.sql").write_text(LATE_JOB)
    Path("clicks.csv").write_text(CLICKS)
    result = weir("run", "late.sql", "--db", "late.duckdb")
    assert result.code == 0, result.err
    # 00:00:04 arrives after the watermark passed 00:00:12, so its window [0 s, 10 s) has fired.
    assert summary_rows(result.out)["per_user.window_aggregate"] == ["5", "3", "1"]
    assert "late rows dropped: 1;" in result.out
    assert "late rows dropped per source: clicks 1" in result.out


def test_run_keeps_late_rows_and_analyze_shows_them_per_operator(weir):
    Path("late.sql").write_text(LATE_JOB.replace("'format' = 'csv'",
                                                 "'format' = 'csv', 'source.late-rows.table' = 'late_clicks'"))
    Path("clicks.csv").write_text(CLICKS)
    result = weir("run", "late.sql", "--db", "late.duckdb", "--analyze")
    assert result.code == 0, result.err
    assert "late rows kept in late.duckdb: late_clicks" in result.out
    plan = result.out[result.out.index("== job late, as run =="):]
    assert "per_user.window_aggregate\n" in plan
    assert "  actual:    rows in 5, rows out 3, late rows dropped 1 (clicks 1)\n" in plan
    late_sink = plan[plan.index("late_clicks.sink"):]
    assert "  input:     per_user.window_aggregate (late rows)\n" in late_sink
    assert late_sink.endswith("  actual:    rows in 1\n")

    kept = weir("query", "SELECT user_id, ts, weir_operator, weir_watermark FROM late_clicks",
                "--db", "late.duckdb", "--format", "csv")
    assert kept.code == 0, kept.err
    assert kept.out.splitlines()[1:] == ["1,2024-01-01 00:00:04.000,per_user.window_aggregate,2024-01-01 00:00:12.000"]


BAD_JOB = BIDS + """CREATE MATERIALIZED VIEW v AS
SELECT auction, prise
FROM bids;
"""


def test_sql_error_exits_1_with_position_source_line_caret_and_hint(weir):
    Path("bad.sql").write_text(BAD_JOB)
    result = weir("run", "bad.sql")
    assert result.code == 1
    assert result.out == ""
    assert result.err == (
        "bad.sql:6:17: error: unknown column `prise` in `bids`\n"
        "  SELECT auction, prise\n"
        "                  ^\n"
        "  hint: did you mean `price`? `bids` has columns: auction, bidder, price, channel, date_time\n"
    )
    assert "\x1b[" not in result.err  # no colour when stderr is not a terminal
    assert not Path("weir.duckdb").exists()


def test_syntax_error_exits_1_with_its_position(weir):
    Path("typo.sql").write_text("CREATE TABLE t (a BIGINT) WITH ('connector' = 'print');\nINSERT INTO t SELEC a FROM t;\n")
    result = weir("run", "typo.sql")
    assert result.code == 1
    first, source_line, caret = result.err.splitlines()[:3]
    assert re.match(r"typo\.sql:2:\d+: error: ", first)
    assert source_line == "  INSERT INTO t SELEC a FROM t;"
    column = int(first.split(":")[2])
    assert caret == "  " + " " * (column - 1) + "^"


def test_every_problem_of_a_statement_is_printed(weir):
    Path("bad.sql").write_text(BIDS + "CREATE MATERIALIZED VIEW v AS SELECT auctoin, prise FROM bids;\n")
    result = weir("run", "bad.sql")
    assert result.code == 1
    assert [line.split(": error: ")[0] for line in result.err.splitlines() if ": error: " in line] == [
        "bad.sql:5:38", "bad.sql:5:47"]
    assert result.err.count("  hint: did you mean") == 2


def test_missing_file_exits_1(weir):
    result = weir("run", "nowhere.sql")
    assert result.code == 1
    assert result.err == "weir: cannot read nowhere.sql: No such file or directory\n"


def test_file_without_pipelines_says_so(weir):
    Path("ddl.sql").write_text(BIDS)
    result = weir("run", "ddl.sql")
    assert result.code == 0
    assert result.out == "nothing to run: the file has no INSERT INTO or CREATE MATERIALIZED VIEW\n"


def test_caret_keeps_the_tabs_of_the_source_line(weir):
    Path("tabs.sql").write_text(BIDS + "CREATE MATERIALIZED VIEW v AS\n\tSELECT\tprise FROM bids;\n")
    result = weir("run", "tabs.sql")
    assert result.err.splitlines()[:3] == [
        "tabs.sql:6:9: error: unknown column `prise` in `bids`",
        "  \tSELECT\tprise FROM bids;",
        "  \t      \t^",
    ]


def test_engine_error_names_the_operator_and_exits_1(weir):
    Path("missing.sql").write_text(
        "CREATE TABLE clicks (user_id BIGINT, ts TIMESTAMP(3))\n"
        "WITH ('connector' = 'filesystem', 'path' = 'nowhere.csv', 'format' = 'csv');\n"
        "CREATE TABLE ignored (user_id BIGINT) WITH ('connector' = 'blackhole');\n"
        "INSERT INTO ignored SELECT user_id FROM clicks;\n")
    result = weir("run", "missing.sql")
    assert result.code == 1
    assert result.out == ""
    assert result.err == (
        "error: in operator clicks.source: the source path 'nowhere.csv' does not exist\n"
        "  hint: create it, or correct the table's 'path' option\n"
    )

"""`weir explain`: the plan of a SQL file, as kept in the planner's goldens."""
from __future__ import annotations

import shutil
from pathlib import Path

GOLDENS = Path(__file__).parents[1] / "planner" / "explain"


def test_explain_prints_the_golden_plan(weir, tmp_path):
    shutil.copy(GOLDENS / "issue_job.sql", tmp_path / "issue_job.sql")
    result = weir("explain", "issue_job.sql")
    assert result.code == 0, result.err
    assert result.out == (GOLDENS / "issue_job.txt").read_text()
    assert not (tmp_path / "out").exists() and not (tmp_path / "weir.duckdb").exists()  # nothing ran


def test_explain_statements_come_first(weir, tmp_path):
    shutil.copy(GOLDENS / "explain_insert.sql", tmp_path / "explain_insert.sql")
    result = weir("explain", "explain_insert.sql")
    headings = [line for line in result.out.splitlines() if line.startswith("== ")]
    assert headings == ["== EXPLAIN at line 10: INSERT INTO auction_counts ==", "== job explain_insert =="]


def test_explain_takes_the_job_name_from_set(weir, tmp_path):
    text = (GOLDENS / "issue_job.sql").read_text()
    (tmp_path / "job.sql").write_text(text + "SET 'pipeline.name' = 'auctions';\n")
    result = weir("explain", "job.sql")
    assert result.out.startswith("== job auctions ==\nbids.source\n")


def test_explain_reports_errors_like_run(weir, tmp_path):
    (tmp_path / "bad.sql").write_text("SELECT a FROM nowhere;\n")
    result = weir("explain", "bad.sql")
    assert result.code == 1
    assert result.err.splitlines()[:3] == [
        "bad.sql:1:15: error: unknown table `nowhere`",
        "  SELECT a FROM nowhere;",
        "                ^",
    ]


def test_unknown_setting_on_the_command_line(weir, tmp_path):
    shutil.copy(GOLDENS / "issue_job.sql", tmp_path / "issue_job.sql")
    result = weir("explain", "issue_job.sql", "--set", "paralelism.default=2")
    assert result.code == 1
    assert result.err == "issue_job.sql: error: unknown setting 'paralelism.default'\n  hint: did you mean 'parallelism.default'?\n"

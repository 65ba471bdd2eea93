"""`weir -c SQL`, `weir -e SQL` and SQL piped on stdin: no terminal, plain text, errors on stderr."""
from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

ESCAPE = "\x1b"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "results.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE totals AS SELECT * FROM (VALUES ('a', 1), ('b', 22)) t(k, n)")
    return str(path)


def weir(*args: str, stdin: str = "", cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "weir.shell.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("flag", ["-c", "-e"])
def test_a_command_prints_plain_rows_and_exits_0(db, tmp_path, flag):
    done = weir(flag, "SELECT k, n FROM totals ORDER BY k; \\pset format csv\nSELECT n FROM totals ORDER BY n;",
                "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ESCAPE not in done.stdout and ESCAPE not in done.stderr and done.stderr == ""
    assert done.stdout == ("k |  n\n--+---\na |  1\nb | 22\n(2 rows)\n"
                           "Output format is csv.\nn\n1\n22\n")


def test_sql_piped_on_stdin_runs_without_a_terminal(db, tmp_path):
    done = weir("--db", db, stdin="SELECT count(*) AS rows_ FROM totals;\n", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert ESCAPE not in done.stdout and done.stderr == ""
    assert done.stdout == "rows_\n-----\n    2\n(1 row)\n"


def test_a_failing_statement_goes_to_stderr_with_status_1(db, tmp_path):
    done = weir("-c", "SELECT * FROM nowhere; SELECT 1;", "--db", db, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""  # the statement after the failing one does not run
    assert "nowhere" in done.stderr and ESCAPE not in done.stderr

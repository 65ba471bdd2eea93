"""psql's display commands in the shell: \\pset format, \\x, \\timing, \\d, \\dt, \\d name."""
from __future__ import annotations

import io
import json

import duckdb
import pytest

from weir.shell.runner import Runner
from weir.shell.session import Session

TABLE = ("CREATE TABLE clicks (user_id BIGINT, url STRING) WITH ('connector' = 'datagen', "
         "'number-of-rows' = '3');\n")


@pytest.fixture
def shell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE totals AS SELECT * FROM (VALUES ('a', 1, 0.5::DOUBLE), ('b,c', 22, NULL)) t(k, n, share)")
    session = Session(db_path=str(path))
    out, err = io.StringIO(), io.StringIO()
    runner = Runner(session, out=out, err=err)

    def run(text: str) -> str:
        out.seek(0)
        out.truncate()
        assert runner.run_text(text) == 0, err.getvalue()
        return out.getvalue()

    yield run
    session.jobs.cancel_all()
    session.jobs.join_all()


QUERY = "SELECT k, n, share FROM totals ORDER BY n;"


def test_each_output_format(shell):
    assert shell(QUERY) == "k   |  n | share\n----+----+------\na   |  1 |   0.5\nb,c | 22 |  NULL\n(2 rows)\n"
    assert shell("\\pset format csv\n" + QUERY) == 'Output format is csv.\nk,n,share\na,1,0.5\n"b,c",22,\n'
    text = shell("\\pset format json\n" + QUERY).split("\n", 1)[1]
    assert json.loads(text) == [{"k": "a", "n": 1, "share": 0.5}, {"k": "b,c", "n": 22, "share": None}]
    assert shell("\\pset format markdown\n" + QUERY) == ("Output format is markdown.\n"
                                                       "| k   |  n | share |\n|-----|---:|------:|\n"
                                                       "| a   |  1 |   0.5 |\n| b,c | 22 |  NULL |\n")
    assert shell("\\pset format line\n" + QUERY) == ("Output format is line.\n"
                                                   "    k = a\n    n = 1\nshare = 0.5\n\n"
                                                   "    k = b,c\n    n = 22\nshare = NULL\n(2 rows)\n")
    assert shell("\\pset format aligned\n" + QUERY).startswith("Output format is table.\nk   |  n | share\n")


def test_unknown_format_is_refused_with_the_known_ones(tmp_path):
    err = io.StringIO()
    runner = Runner(Session(db_path=str(tmp_path / "x.duckdb")), out=io.StringIO(), err=err)
    runner.run_text("\\pset format html")
    assert "unknown format 'html'" in err.getvalue() and "table, csv, json, markdown, line" in err.getvalue()
    assert runner.display.format == "table"


def test_expanded_display_and_timing(shell):
    assert shell("\\x\n" + QUERY) == ("Expanded display is on.\n"
                                      "-[ RECORD 1 ]\nk     | a\nn     | 1\nshare | 0.5\n"
                                      "-[ RECORD 2 ]\nk     | b,c\nn     | 22\nshare | NULL\n(2 rows)\n")
    shell("\\x off")
    lines = shell("\\timing on\nSELECT 1 AS one;").splitlines()
    assert lines[0] == "Timing is on." and lines[1:4] == ["one", "---", "  1"]
    assert lines[-1].startswith("Time: ") and lines[-1].endswith(" ms") and float(lines[-1].split()[1]) >= 0


def test_d_lists_and_describes(shell):
    shell(TABLE)
    dt = shell("\\dt")
    assert dt.splitlines()[2].split("|")[0].strip() == "clicks" and "datagen" in dt
    d = shell("\\d")
    assert "clicks" in d and "totals" in d and "view name" in d
    described = shell("\\d clicks").splitlines()
    assert [line.split("|")[0].strip() for line in described[2:4]] == ["user_id", "url"]
    assert "BIGINT" in described[2]
    assert [line.split("|")[0].strip() for line in shell("\\d totals").splitlines()[2:5]] == ["k", "n", "share"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_pager_on_sends_the_answer_through_PAGER_on_a_terminal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("PAGER", f"sh -c 'cat > {paged}'")
    out = Terminal()
    runner = Runner(Session(db_path=str(tmp_path / "x.duckdb")), out=out, err=io.StringIO())
    assert runner.run_text("\\pset pager on\nSELECT 7 AS seven;") == 0
    assert out.getvalue() == "Pager usage is on.\n"
    assert paged.read_text() == "seven\n-----\n    7\n(1 row)\n"

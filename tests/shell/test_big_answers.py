"""Big answers: the first and last rows and a count, fetched alone from DuckDB; all rows into a pipe."""
from __future__ import annotations

import io

import duckdb
import pytest

from weir.shell import render
from weir.shell.database import open_results
from weir.shell.runner import Runner
from weir.sql import parse

ROWS = 300_000


@pytest.fixture
def big_db(tmp_path):
    path = tmp_path / "big.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(f"CREATE TABLE big AS SELECT range AS id, 'name ' || range AS name FROM range({ROWS})")
    return str(path)


def test_a_big_answer_shows_its_head_tail_and_count_and_fetches_only_those(big_db):
    answer = render.query_answer(open_results(big_db), "SELECT * FROM big ORDER BY id")
    try:
        lines = render.render(answer, "table", max_rows=40).splitlines()
    finally:
        answer.close()
    assert answer.rows == ROWS
    assert answer.fetched == 40  # the 40 rows shown; the other 299,960 never left DuckDB
    assert lines[0].split("|")[0].strip() == "id" and lines[1].startswith("-")
    assert [int(line.split("|")[0]) for line in lines[2:22]] == list(range(20))
    assert lines[22].split("|")[0].strip() == "…"
    assert [int(line.split("|")[0]) for line in lines[23:43]] == list(range(ROWS - 20, ROWS))
    assert lines[43] == "(300,000 rows, 40 shown)" and len(lines) == 44
    assert lines[2] == "     0 | name 0"  # numbers right-aligned


def test_weir_query_caps_with_max_rows_and_streams_every_row_into_a_pipe(weir, big_db):
    capped = weir("query", "SELECT id FROM big ORDER BY id", "--db", big_db, "--max-rows", "10")
    assert capped.code == 0, capped.err
    lines = capped.out.splitlines()
    assert lines[-1] == "(300,000 rows, 10 shown)" and len(lines) == 2 + 10 + 1 + 1
    whole = weir("query", "SELECT id FROM big ORDER BY id", "--db", big_db, "--format", "csv")
    assert whole.code == 0, whole.err
    assert whole.out.splitlines() == ["id", *map(str, range(ROWS))]
    piped = weir("query", "SELECT id FROM big ORDER BY id", "--db", big_db)  # not a terminal: every row
    assert len(piped.out.splitlines()) == 2 + ROWS + 1 and piped.out.endswith("(300,000 rows)\n")


def test_the_shell_shows_a_big_answer_capped_and_reads_only_what_it_shows(session, big_db):
    session.database = type(session.database)(big_db)
    out = io.StringIO()
    runner = Runner(session, out=out, err=io.StringIO())
    runner.display.max_rows = 6  # as on a terminal (\pset max_rows 6)
    reply = session.execute(parse("SELECT * FROM big;")[0])
    answer = reply.answer
    runner.show(reply)
    assert answer.fetched == 6
    lines = out.getvalue().splitlines()
    assert [line.split("|")[0].strip() for line in lines[2:9]] == ["0", "1", "2", "…", "299997", "299998", "299999"]
    assert lines[-1] == "(300,000 rows, 6 shown)"

"""SHOW CREATE TABLE|VIEW, SHOW [USER] FUNCTIONS, SHOW CATALOGS / DATABASES (Flink's SQL client's)."""
from __future__ import annotations

import duckdb
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document

from weir.shell.api import Connection
from weir.shell.completion import SqlCompleter
from weir.shell.session import Message, ResultTable, Session
from weir.sql import parse
from weir.sql.errors import WeirSqlError

TABLE = "CREATE TABLE clicks (user_id BIGINT, url STRING) WITH ('connector' = 'datagen', 'number-of-rows' = '3')"
VIEW = "CREATE VIEW long_urls AS SELECT url FROM clicks WHERE CHAR_LENGTH(url) > 10"


def shout(text: str) -> str:
    return text.upper() + "!"


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "r.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE totals (k VARCHAR, n BIGINT)")
    s = Session(db_path=str(path))
    yield s
    s.jobs.cancel_all()
    s.jobs.join_all()


def run(session: Session, text: str):
    return session.execute(parse(text + ";")[0])


def column(reply) -> list:
    assert isinstance(reply, ResultTable), reply
    return reply.table.column(0).to_pylist()


def test_show_create_gives_the_declaring_statement(session):
    run(session, TABLE)
    run(session, VIEW)
    assert run(session, "SHOW CREATE TABLE clicks") == Message(TABLE + ";")
    assert run(session, "SHOW CREATE VIEW long_urls") == Message(VIEW + ";")
    assert run(session, "SHOW CREATE TABLE totals") == Message("CREATE TABLE totals(k VARCHAR, n BIGINT);")
    with pytest.raises(WeirSqlError, match="is a view") as error:
        run(session, "SHOW CREATE TABLE long_urls")
    assert "SHOW CREATE VIEW long_urls" in str(error.value)
    with pytest.raises(WeirSqlError, match="unknown table or view `nowhere`"):
        run(session, "SHOW CREATE TABLE nowhere")


def test_show_functions_lists_duckdb_flink_and_the_sessions_own(session):
    connection = Connection(session=session)
    connection.create_function("shout", shout, result_type="STRING")
    names = column(run(session, "SHOW FUNCTIONS"))
    assert names == sorted(set(names))
    # DuckDB's (list_sort), Flink's the dialect translates (DATE_FORMAT), windows (TUMBLE), the UDF
    assert {"LIST_SORT", "STRING_SPLIT", "DATE_FORMAT", "TUMBLE", "COUNT", "SHOUT"} <= set(names)
    assert len(names) > 500 and all(name.replace("_", "").isalnum() for name in names)
    assert column(run(session, "SHOW USER FUNCTIONS")) == ["shout"]


def test_completion_offers_the_session_functions(session):
    Connection(session=session).create_function("shout", shout, result_type="STRING")
    completer = SqlCompleter(lambda: {}, session.function_names)
    found = [c.text for c in completer.get_completions(Document("SELECT list_so"), CompleteEvent())]
    assert "list_sort" in found  # DuckDB's, not in any fixed list
    found = [c.text for c in completer.get_completions(Document("SELECT sho"), CompleteEvent())]
    assert "shout" in found


def test_show_catalogs_and_databases_as_flink_names_them(session):
    assert column(run(session, "SHOW CATALOGS")) == ["default_catalog"]
    assert column(run(session, "SHOW CURRENT CATALOG")) == ["default_catalog"]
    assert column(run(session, "SHOW DATABASES")) == ["default_database"]
    assert column(run(session, "SHOW CURRENT DATABASE")) == ["default_database"]


def test_the_parser_reads_the_show_statements():
    shows = parse("SHOW CREATE TABLE `My t`; SHOW USER FUNCTIONS; SHOW DATABASES;")
    assert [(s.what, s.name) for s in shows] == [("CREATE TABLE", "My t"), ("USER FUNCTIONS", None),
                                                 ("DATABASES", None)]
    with pytest.raises(WeirSqlError, match="expected a table name"):
        parse("SHOW CREATE TABLE;")

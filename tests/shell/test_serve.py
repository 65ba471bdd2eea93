"""The Postgres endpoint (shell/pgwire) with real clients: psql and psycopg 3."""
from __future__ import annotations

import datetime
import os
import socket
import struct
import subprocess
from decimal import Decimal

import duckdb
import psycopg
import pytest

from weir.shell.api import Connection
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.server import ServeError, ServeOptions, Server, check_listen
from weir.sql import parse

PSQL = "/usr/bin/psql"
TYPES_TABLE = """
CREATE TABLE minutes AS SELECT
  range::BIGINT AS id, range::INTEGER AS n, (range * 1.5)::DOUBLE AS x, (range / 3)::DECIMAL(10, 2) AS d,
  range % 2 = 0 AS even, 'name' || range AS name,
  TIMESTAMP '2024-01-01 00:00:00.25' + range * INTERVAL 1 MINUTE AS ts, DATE '2024-01-01' + range::INTEGER AS day
FROM range(5)
"""


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "results.duckdb")
    con = duckdb.connect(path)
    con.execute(TYPES_TABLE)
    con.execute("CREATE TABLE _weir_sink_commits (table_name VARCHAR)")  # bookkeeping, hidden from catalogs
    con.close()
    return path


def serving(db: str, tmp_path, **options):
    connection = Connection(db, state_dir=tmp_path / "jobs")
    server = Server(connection, ResultReader(db, beside_jobs=False), ServeOptions(port=0, **options))
    server.start_in_thread()
    return server


@pytest.fixture
def server(db, tmp_path):
    server = serving(db, tmp_path)
    yield server
    server.stop()


def dsn(server, **extra) -> str:
    words = {"host": "127.0.0.1", "port": server.port, "user": "tester", "dbname": "weir", **extra}
    return " ".join(f"{k}={v}" for k, v in words.items())


def psql(server, *args, password=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    env.pop("PGPASSWORD", None)
    if password:
        env["PGPASSWORD"] = password
    return subprocess.run([PSQL, "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester", "-d", "weir",
                           "-w", "-X", *args], capture_output=True, text=True, env=env, timeout=60)


EXPECTED_ROW_3 = (3, 3, 4.5, Decimal("1.00"), False, "name3", datetime.datetime(2024, 1, 1, 0, 3, 0, 250000),
                  datetime.date(2024, 1, 4))


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_reads_every_type_with_parameters(server, binary):
    with psycopg.connect(dsn(server), autocommit=True) as con:
        cur = con.cursor(binary=binary)
        cur.execute("SELECT * FROM minutes WHERE id = %s AND name = %s", [3, "name3"])
        assert cur.fetchall() == [EXPECTED_ROW_3]
        assert [d.type_code for d in cur.description] == [20, 23, 701, 1700, 16, 25, 1114, 1082]
        assert cur.pgresult.fformat(0) == (1 if binary else 0)
        cur.execute("SELECT %s::DECIMAL(10, 2) + 1, %s::DATE, %s::TIMESTAMP, %s, 7 / 2, NULL::INTEGER",
                    [Decimal("2.50"), datetime.date(2020, 1, 2), datetime.datetime(2020, 1, 2, 3, 4, 5, 6), 1.25])
        assert cur.fetchall() == [(Decimal("3.50"), datetime.date(2020, 1, 2),
                                   datetime.datetime(2020, 1, 2, 3, 4, 5, 6), 1.25, 3, None)]


def test_psycopg_simple_protocol_prepared_statements_and_transactions(server):
    with psycopg.connect(dsn(server)) as con:  # not autocommit: psycopg sends BEGIN first
        cur = psycopg.ClientCursor(con)  # parameters merged client-side, sent as a simple Query
        cur.execute("SELECT count(*), sum(x) FROM minutes WHERE even = %s", [True])
        assert cur.fetchone() == (3, 9.0)
        con.commit()
        for i in range(6):  # psycopg prepares a statement it runs often (Parse once, Bind many)
            assert con.execute("SELECT name FROM minutes WHERE id = %s", [i % 5], prepare=True).fetchone() == \
                (f"name{i % 5}",)
        assert con.execute("SHOW jobs").fetchall() == []
        assert con.execute("SHOW transaction_isolation").fetchone() == ("read committed",)


def test_errors_name_the_problem_and_the_connection_goes_on(server):
    with psycopg.connect(dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.errors.UndefinedTable) as caught:
            con.execute("SELECT * FROM nowhere")
        assert "minutes" in caught.value.diag.message_hint and "_weir" not in caught.value.diag.message_hint
        with pytest.raises(psycopg.errors.SyntaxError):
            con.execute("SELEC 1")
        assert con.execute("SELECT max(id) FROM minutes").fetchone() == (4,)


@pytest.mark.parametrize("statement", [
    "CREATE TABLE t (a INT) WITH ('connector' = 'datagen')", "INSERT INTO minutes SELECT * FROM minutes",
    "DROP VIEW minutes", "COPY minutes TO 'out.csv'", "DELETE FROM minutes", "ATTACH 'other.duckdb'",
    "SET 'parallelism.default' = '2'",
])
def test_read_only_refuses_statements_that_change_things(server, statement):
    with psycopg.connect(dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            con.execute(statement)
        assert con.execute("SELECT count(*) FROM minutes").fetchone() == (5,)


def test_queries_read_no_file_but_the_database(server):
    with psycopg.connect(dsn(server), autocommit=True) as con:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute("SELECT * FROM read_text('/etc/hostname')")


def test_allow_writes_runs_weir_statements(db, tmp_path):
    server = serving(db, tmp_path, allow_writes=True)
    try:
        with psycopg.connect(dsn(server), autocommit=True) as con:
            con.execute("CREATE TABLE bids (auction BIGINT) WITH ('connector' = 'datagen')")
            assert [row[0] for row in con.execute("SHOW TABLES").fetchall()] == ["bids"]
    finally:
        server.stop()


def test_show_functions_catalogs_and_create_answer_as_the_shell_does(db, tmp_path):
    server = serving(db, tmp_path, allow_writes=True)
    try:
        with psycopg.connect(dsn(server), autocommit=True) as con:
            con.execute("CREATE TABLE bids (auction BIGINT) WITH ('connector' = 'datagen')")
            for sql in ("SHOW FUNCTIONS", "SHOW USER FUNCTIONS", "SHOW CATALOGS", "SHOW DATABASES",
                        "SHOW CURRENT CATALOG", "SHOW CURRENT DATABASE"):
                shell = server.connection.reply(parse(sql)[0]).table
                assert con.execute(sql).fetchall() == list(zip(*shell.to_pydict().values())), sql
            functions = [row[0] for row in con.execute("SHOW FUNCTIONS").fetchall()]
            assert {"tumble", "count", "upper"} <= {f.lower() for f in functions}
            for sql, start in (("SHOW CREATE TABLE bids", "CREATE TABLE bids (auction BIGINT)"),
                               ("SHOW CREATE TABLE minutes", "CREATE TABLE \"minutes\"(id BIGINT")):
                shell = server.connection.reply(parse(sql)[0]).text
                assert shell.startswith(start)
                cur = con.execute(sql)
                assert [d.name for d in cur.description] == ["result"]
                assert cur.fetchall() == [(shell,)]
            with pytest.raises(psycopg.errors.SyntaxError, match="`bids` is a table"):
                con.execute("SHOW CREATE VIEW bids")
        shown = psql(server, "-A", "-t", "-c", "SHOW CREATE TABLE bids")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.strip() == server.connection.reply(parse("SHOW CREATE TABLE bids")[0]).text
    finally:
        server.stop()


def test_statement_timeout_and_row_limit(db, tmp_path):
    server = serving(db, tmp_path, max_rows=3)
    try:
        with psycopg.connect(dsn(server), autocommit=True) as con:
            with pytest.raises(psycopg.errors.ProgramLimitExceeded, match="more than 3 rows"):
                con.execute("SELECT * FROM minutes")
            con.execute("SET statement_timeout = 50")
            with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout") as cancelled:
                con.execute("SELECT count(*) FROM range(1000000000000) a, range(1000) b")
            # The limit is this connection's own: the hint names the SET that lowered it, not the server's flag.
            assert "SET statement_timeout (the server allows 30 s)" in cancelled.value.diag.message_hint
            con.execute("SET statement_timeout = 0")  # the server's own limit again
            assert con.execute("SELECT id FROM minutes WHERE id = 1").fetchall() == [(1,)]
    finally:
        server.stop()


def test_psql_queries_and_describes_tables(server):
    answer = psql(server, "-A", "-t", "-c", "SELECT id, name, ts FROM minutes WHERE id = 3")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == "3|name3|2024-01-01 00:03:00.25"
    tables = psql(server, "-c", r"\dt")
    assert tables.returncode == 0, tables.stderr
    assert "minutes" in tables.stdout and "_weir" not in tables.stdout
    described = psql(server, "-c", r"\d minutes")
    assert described.returncode == 0, described.stderr
    columns = {line.split("|")[0].strip(): line.split("|")[1].strip()
               for line in described.stdout.splitlines() if line.count("|") >= 4}
    assert columns == {"Column": "Type", "id": "int8", "n": "int4", "x": "float8", "d": "numeric(10,2)",
                       "even": "bool", "name": "varchar", "ts": "timestamp", "day": "date"}


def test_gui_clients_list_tables_and_columns(server):
    with psycopg.connect(dsn(server), autocommit=True) as con:
        tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
        assert tables == [("main", "minutes")]
        columns = con.execute("SELECT column_name, data_type FROM information_schema.columns "
                              "WHERE table_name = %s ORDER BY ordinal_position", ["minutes"]).fetchall()
        assert columns[:2] == [("id", "BIGINT"), ("n", "INTEGER")] and len(columns) == 8
        oid = con.execute("SELECT 'minutes'::regclass").fetchone()[0]
        assert con.execute("SELECT count(*) FROM pg_catalog.pg_attribute WHERE attrelid = %s AND attnum > 0",
                           [oid]).fetchone() == (8,)


def test_scram_password_accepted_and_refused(db, tmp_path):
    server = serving(db, tmp_path, password="s3cret")
    try:
        assert psql(server, "-A", "-t", "-c", "SELECT count(*) FROM minutes", password="s3cret").stdout.strip() == "5"
        refused = psql(server, "-c", "SELECT 1", password="wrong")
        assert refused.returncode != 0 and "password authentication failed" in refused.stderr
        with psycopg.connect(dsn(server, password="s3cret")) as con:
            assert con.execute("SELECT 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(dsn(server, password="nope"))
    finally:
        server.stop()


def test_listening_beyond_localhost_needs_a_password():
    with pytest.raises(ServeError, match="without a password") as caught:
        check_listen("0.0.0.0", None)
    assert "--password-file" in caught.value.hint
    check_listen("0.0.0.0", "secret")
    check_listen("::1", None)


def _startup(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    params = b"user\x00evil\x00database\x00weir\x00\x00"
    sock.sendall(struct.pack("!ii", len(params) + 8, 196608) + params)
    return sock


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


@pytest.mark.parametrize("hostile", [
    b"Q" + struct.pack("!i", 0x7FFFFFF0) + b"SELECT",  # a length far over the limit
    b"Q" + struct.pack("!i", 2),  # a length that does not count itself
    b"\x01" + struct.pack("!i", 4),  # an unknown message type
    b"B" + struct.pack("!i", 14) + b"\x00\x00" + struct.pack("!hhi", 0, 1, 1000),  # Bind: a value past its end
])
def test_hostile_messages_close_that_connection_only(server, hostile):
    bystander = psycopg.connect(dsn(server), autocommit=True)
    sock = _startup(server.port)
    sock.sendall(hostile)
    answer = _read_until_closed(sock)
    assert b"08P01" in answer and b"protocol violation" in answer
    assert bystander.execute("SELECT count(*) FROM minutes").fetchone() == (5,)
    with psycopg.connect(dsn(server)) as second:
        assert second.execute("SELECT 1").fetchone() == (1,)
    bystander.close()


def test_a_bad_startup_packet_closes_that_connection_only(server):
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(struct.pack("!i", 3) + b"garbage")
    assert b"08P01" in _read_until_closed(sock)
    with psycopg.connect(dsn(server)) as second:
        assert second.execute("SELECT 1").fetchone() == (1,)


def test_a_connection_reads_each_newly_published_snapshot(db, tmp_path):
    """The query threads keep their cursors between queries, but never past a publish: each
    answer is the latest published snapshot's, as a new cursor would give."""
    from weir.engine.connectors.duckdb_snapshot import publisher_for

    reader = ResultReader(db, beside_jobs=False)
    with reader.cursor() as first:
        pass
    with reader.cursor() as again:
        assert again is first  # no publish in between: the same cursor
    server = Server(Connection(db, state_dir=tmp_path / "jobs"), reader, ServeOptions(port=0))
    server.start_in_thread()
    try:
        with psycopg.connect(dsn(server), autocommit=True) as con:
            for n in range(1, 6):
                with publisher_for(db).change(10) as change:
                    change.execute("UPDATE minutes SET n = ? WHERE id = 0", [n * 100])
                for _ in range(3):  # prepared (extended protocol) and simple, again and again
                    assert con.execute("SELECT n FROM minutes WHERE id = %s", [0]).fetchone() == (n * 100,)
                    assert con.execute("SELECT n FROM minutes WHERE id = 0", prepare=False).fetchone() == (n * 100,)
    finally:
        server.stop()
    with reader.cursor() as latest:
        assert latest is not first  # published since: a new cursor
        assert latest.execute("SELECT n FROM minutes WHERE id = 0").fetchone() == (500,)

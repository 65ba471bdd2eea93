"""The Arrow Flight SQL endpoint (shell/flightsql) with ADBC's Flight SQL driver and pyarrow.flight."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import duckdb
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs import bids_over_nexmark
from weir.shell.cli import main
from weir.shell.database import open_results
from weir.shell.flightsql import protocol as pb
from weir.shell.flightsql import server as flight_server
from weir.shell.flightsql.server import FlightOptions, FlightSqlServer
from weir.shell.pgwire.options import ServeError

VIEW = """
CREATE MATERIALIZED VIEW channel_minutes AS
SELECT channel, window_start, COUNT(*) AS bids, AVG(CAST(price AS DOUBLE)) AS mean_price
FROM TUMBLE(bids, date_time, INTERVAL '1' MINUTE)
GROUP BY channel, window_start, window_end;
"""
QUERY = "SELECT * FROM channel_minutes ORDER BY channel, window_start"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    """A job's database: the view above over 3,000 generated bids, the job run to its end."""
    folder = tmp_path_factory.mktemp("flight")
    (folder / "job.sql").write_text(bids_over_nexmark(3000, rate=100) + VIEW)
    done = subprocess.run([sys.executable, "-m", "weir.shell.cli", "run", "job.sql", "--no-progress"],
                          cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return str(folder / "weir.duckdb")


@pytest.fixture(scope="module")
def oracle(db) -> pa.Table:
    con = open_results(db)
    try:
        return con.sql(QUERY).to_arrow_table()
    finally:
        con.close()


@pytest.fixture(scope="module")
def server(db):
    server = FlightSqlServer(db, FlightOptions(port=0))
    server.start()
    yield server
    server.stop()


def connect(server, **db_kwargs):
    return flight_sql.connect(f"grpc://127.0.0.1:{server.port}", db_kwargs=db_kwargs or None, autocommit=True)


def test_select_gives_the_views_columns_as_arrow(server, oracle):
    assert oracle.num_rows > 3
    with connect(server) as con, con.cursor() as cur:
        cur.execute(QUERY)
        answer = cur.fetch_arrow_table()
    # VARCHAR, TIMESTAMP(3) (as the view's table keeps it: DuckDB's TIMESTAMP), BIGINT, DOUBLE:
    assert answer.schema.types == [pa.string(), pa.timestamp("us"), pa.int64(), pa.float64()]
    assert answer.schema.names == ["channel", "window_start", "bids", "mean_price"]
    assert answer.equals(oracle)


def test_an_answer_of_many_batches_arrives_whole_and_in_order(server):
    query = "SELECT range AS n, 'row ' || range AS label FROM range(150000) ORDER BY n"  # 3 batches of 65,536
    with connect(server) as con, con.cursor() as cur:
        cur.execute(query)
        answer = cur.fetch_arrow_table()
    assert answer.equals(duckdb.sql(query).to_arrow_table())


@settings(max_examples=15, deadline=None)
@given(batch_rows=st.integers(1, 5000))
def test_the_answer_does_not_depend_on_the_batch_size(server, oracle, batch_rows):
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flight_server, "BATCH_ROWS", batch_rows)
        chunks = list(client.do_get(flight.Ticket(pb.TicketStatementQuery(QUERY.encode()).pack())))
    assert all(len(chunk.data) <= batch_rows for chunk in chunks)
    assert pa.Table.from_batches([chunk.data for chunk in chunks]).equals(oracle)


def test_prepared_statement_binds_a_parameter(server, oracle):
    channel = oracle["channel"][0].as_py()
    expected = oracle.filter(pa.compute.equal(oracle["channel"], channel)).select(["window_start", "bids"])
    with connect(server) as con, con.cursor() as cur:
        cur.execute("SELECT window_start, bids FROM channel_minutes WHERE channel = ? ORDER BY window_start",
                    parameters=[channel])
        assert cur.fetch_arrow_table().equals(expected)
        cur.execute("SELECT count(*) AS n FROM channel_minutes WHERE channel = ?", parameters=["no such"])
        assert cur.fetchall() == [(0,)]


def test_the_catalog_lists_the_view_and_hides_bookkeeping(server, oracle):
    with connect(server) as con:
        objects = con.adbc_get_objects(depth="columns").read_all().to_pylist()
        assert con.adbc_get_table_schema("channel_minutes").types == oracle.schema.types
        assert con.adbc_get_table_types() == ["TABLE", "VIEW"]
        assert con.adbc_get_info()["vendor_name"] == "weir"
    [catalog] = objects
    tables = {t["table_name"]: t for s in catalog["catalog_db_schemas"] for t in s["db_schema_tables"]}
    assert list(tables) == ["channel_minutes"]  # the job's _weir* tables are not listed
    assert [c["column_name"] for c in tables["channel_minutes"]["table_columns"]] == oracle.schema.names


@pytest.mark.parametrize("statement", ["DROP TABLE channel_minutes", "CREATE TABLE t (a INT)",
                                       "SELECT 1; DROP TABLE channel_minutes",
                                       "COPY channel_minutes TO 'out.csv'"])
def test_statements_that_change_things_are_refused(server, statement):
    with connect(server) as con, con.cursor() as cur:
        with pytest.raises(adbc_driver_manager.ProgrammingError, match="refused: weir's Flight SQL endpoint is "
                                                                       "read-only"):
            cur.execute(statement)
        cur.execute("SELECT count(*) FROM channel_minutes")
        assert cur.fetchall()[0][0] > 0


def test_a_query_reads_no_file_but_the_results(server):
    with connect(server) as con, con.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="reads the result database only"):
            cur.execute("SELECT * FROM read_csv('/etc/passwd')")


def test_an_update_over_do_put_is_refused(server):
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    descriptor = flight.FlightDescriptor.for_command(pb.CommandStatementUpdate("DELETE FROM channel_minutes").pack())
    with pytest.raises(flight.FlightUnauthorizedError, match="read-only"):
        writer, _ = client.do_put(descriptor, pa.schema([]))
        writer.close()


def test_garbage_is_an_error_of_its_call_and_the_server_serves_on(server, oracle):
    client = flight.connect(f"grpc://127.0.0.1:{server.port}")
    with pytest.raises(pa.ArrowInvalid, match="bad Flight SQL message"):
        client.do_get(flight.Ticket(b"\x0a\xff\xff\xff")).read_all()
    with pytest.raises(pa.ArrowInvalid, match="not a Flight SQL command"):
        client.get_flight_info(flight.FlightDescriptor.for_command(b"\x0a\x03abc"))
    with pytest.raises(pa.ArrowInvalid, match="CommandGetXdbcTypeInfo is not answered"):
        client.get_flight_info(flight.FlightDescriptor.for_command(
            b"\x0a\x44type.googleapis.com/arrow.flight.protocol.sql.CommandGetXdbcTypeInfo"))
    with pytest.raises(pa.ArrowInvalid, match="statement handle"):  # a ticket this server never issued
        client.do_get(flight.Ticket(pb.TicketStatementQuery(b"\xff\xfe").pack())).read_all()
    with pytest.raises(pa.ArrowInvalid, match="the query is empty"):
        client.get_flight_info(flight.FlightDescriptor.for_command(pb.CommandStatementQuery(" -- nothing").pack()))
    with pytest.raises(KeyError, match="no prepared statement"):
        client.do_get(flight.Ticket(pb.CommandPreparedStatementQuery(b"forged").pack())).read_all()
    with pytest.raises(pa.ArrowInvalid, match="channel_minutez.*the result tables: channel_minutes"):
        client.do_get(flight.Ticket(pb.TicketStatementQuery(b"SELECT * FROM channel_minutez").pack())).read_all()
    # The same server, a raw ticket of its own kind, then another client:
    ticket = pb.TicketStatementQuery(QUERY.encode()).pack()
    assert client.do_get(flight.Ticket(ticket)).read_all().equals(oracle)
    with connect(server) as con, con.cursor() as cur:
        cur.execute(QUERY)
        assert cur.fetch_arrow_table().equals(oracle)


def test_a_password_is_asked_of_every_client(db, oracle):
    server = FlightSqlServer(db, FlightOptions(port=0, password="s3cret"))
    server.start()
    try:
        for credentials in ({}, {"username": "me", "password": "wrong"}):
            with pytest.raises(adbc_driver_manager.Error, match="needs its password|Unauthenticated"):
                with connect(server, **credentials) as con, con.cursor() as cur:
                    cur.execute(QUERY)
        with connect(server, username="me", password="s3cret") as con, con.cursor() as cur:
            cur.execute(QUERY)
            assert cur.fetch_arrow_table().equals(oracle)
    finally:
        server.stop()


def test_listening_beyond_localhost_needs_a_password(db):
    with pytest.raises(ServeError, match="without a password"):
        FlightSqlServer(db, FlightOptions(host="0.0.0.0", port=0))


def test_weir_serve_flight_refuses_a_bad_address(db, capsys):
    assert main(["serve", "--db", db, "--flight", "127.0.0.1:port"]) == 1
    assert "--flight '127.0.0.1:port': the port must be a number" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert main(["serve", "--db", db, "--flight", f"127.0.0.1:{taken.getsockname()[1]}"]) == 1
    assert "cannot listen on 127.0.0.1:" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "run"])
def test_weir_serve_and_run_flight_answer_adbc(db, oracle, command):
    """`weir serve --flight` beside the Postgres listener; `weir run job.sql --flight` alone (the
    job has finished already, so it runs nothing and serves its results until Ctrl-C)."""
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    args = (["serve", "--db", db, "--listen", f"127.0.0.1:{ports[0]}"] if command == "serve"
            else ["run", "job.sql", "--no-progress"])
    process = subprocess.Popen([sys.executable, "-m", "weir.shell.cli", *args, "--flight", f"127.0.0.1:{ports[1]}"],
                               cwd=Path(db).parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while "Flight SQL clients" not in (line := process.stderr.readline()):
            assert line, f"weir serve ended before listening: {process.stderr.read()}"
        with flight_sql.connect(f"grpc://127.0.0.1:{ports[1]}", autocommit=True) as con, con.cursor() as cur:
            cur.execute(QUERY)
            assert cur.fetch_arrow_table().equals(oracle)
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    assert process.returncode == 0


def test_the_command_line_loads_pyarrow_flight_only_for_flight():
    code = ("import sys\nfrom weir.shell import cli, commands\ntry:\n    cli.main(['--help'])\n"
            "except SystemExit:\n    pass\nprint('pyarrow._flight' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines()[-1] == "False", done.stderr


# -- the protobuf codec ------------------------------------------------------------------
texts = st.none() | st.text(max_size=20)


@settings(max_examples=50, deadline=None)
@given(catalog=texts, schema=texts, table=texts, types=st.lists(st.text(max_size=8), max_size=3),
       include=st.booleans())
def test_messages_read_back_as_written(catalog, schema, table, types, include):
    command = pb.CommandGetTables(catalog, schema, table, types, include)
    assert pb.unpack(command.pack()) == command
    info = pb.CommandGetSqlInfo([0, 3, 504, 2**32 - 1])
    assert pb.unpack(info.pack()) == info


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_are_a_message_or_a_protocol_error(data):
    try:
        assert isinstance(pb.unpack(data), pb.Message)
    except pb.ProtocolError:
        pass


def test_the_codec_reads_what_protobuf_writes():
    # CommandStatementQuery{query: "SELECT 1"} in an Any, as protobuf serialises it (field 1 then 2).
    wire = (b"\x0a\x43type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"
            b"\x12\x0a\x0a\x08SELECT 1")
    assert pb.unpack(wire) == pb.CommandStatementQuery("SELECT 1")
    assert pb.CommandStatementQuery("SELECT 1").pack() == wire
    # A packed repeated uint32 (proto3) and the unpacked form (proto2) both read.
    assert pb.CommandGetSqlInfo.decode(b"\x0a\x03\x00\x03\x01") == pb.CommandGetSqlInfo([0, 3, 1])
    assert pb.CommandGetSqlInfo.decode(b"\x08\x00\x08\x03") == pb.CommandGetSqlInfo([0, 3])
    with pytest.raises(pb.ProtocolError, match="ends sooner"):
        pb.CommandStatementQuery.decode(b"\x0a\x09SELECT")

"""The Arrow Flight SQL endpoint: query results as Arrow columns over gRPC, for ADBC's
Flight SQL driver (polars, pandas, DuckDB), JDBC's Flight SQL driver and pyarrow.flight.

A query, as Flight SQL runs it:

1. ``GetFlightInfo(CommandStatementQuery{query})``: DuckDB's own parser checks that
   the text is one SELECT (anything else is refused, PERMISSION_DENIED: the endpoint
   is read-only); the answer's Arrow schema comes from the query with LIMIT 0; the one
   endpoint's ticket is ``TicketStatementQuery`` whose handle is the query text (no
   state kept between the two calls).
2. ``DoGet(ticket)``: the query runs on the latest committed snapshot of the result
   database (``LatestResults``, sealed: no file but the database is read; no query
   delays a job's commit) and its batches stream to the client as DuckDB makes them.
3. A prepared statement: ``CreatePreparedStatement`` checks and describes the query
   and keeps it under a random handle (at most ``MAX_PREPARED``, the oldest
   forgotten first); ``DoPut(CommandPreparedStatementQuery)`` binds parameter rows;
   ``GetFlightInfo`` / ``DoGet`` of it run the query once per bound row, one stream;
   ``ClosePreparedStatement`` forgets it.
4. The catalog commands (GetCatalogs, GetDbSchemas, GetTables, GetTableTypes,
   GetSqlInfo) are answered from ``catalog.py``; their ticket is the command itself.

Bad bytes, unknown commands and failing queries are errors of the call alone
(INVALID_ARGUMENT, UNIMPLEMENTED, NOT_FOUND): the server serves on.
"""
from __future__ import annotations

import collections
import secrets
import threading
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.flight as flight

from weir.shell.database import LatestResults
from weir.shell.flightsql import catalog
from weir.shell.flightsql import protocol as pb
from weir.shell.flightsql.auth import HandshakeAnswer, PasswordAuth
from weir.shell.pgwire.options import ServeError, check_listen

__all__ = ["FlightSqlServer", "FlightOptions"]

#: Rows per record batch a query's answer streams in.
BATCH_ROWS = 65_536
#: Prepared statements kept at once; a newer one makes the server forget the oldest.
MAX_PREPARED = 1024

_CATALOG_COMMANDS = (pb.CommandGetCatalogs, pb.CommandGetDbSchemas, pb.CommandGetTables, pb.CommandGetTableTypes,
                     pb.CommandGetSqlInfo)
_WRITES = (pb.CommandStatementUpdate, pb.CommandPreparedStatementUpdate, pb.CommandStatementIngest)


@dataclass
class FlightOptions:
    host: str = "127.0.0.1"
    port: int = 8815
    password: str | None = None


@dataclass
class Prepared:
    query: str
    schema: pa.Schema
    #: The bound parameter rows (each a list, in the order of $1, $2, ...); one empty row: none bound.
    parameters: list[list] = field(default_factory=lambda: [[]])


class FlightSqlServer(flight.FlightServerBase):
    def __init__(self, db_path: str, options: FlightOptions):
        check_listen(options.host, options.password)
        host = f"[{options.host}]" if ":" in options.host else options.host
        password = dict(middleware={"auth": PasswordAuth(options.password)}, auth_handler=HandshakeAnswer()) \
            if options.password else {}
        try:
            super().__init__(f"grpc://{host}:{options.port}", **password)
        except (OSError, pa.ArrowException) as error:
            raise ServeError(f"cannot listen on {options.host}:{options.port} for Flight SQL (is the port taken, "
                             f"or the address not this machine's?): {str(error).splitlines()[0]}",
                             "choose another with --flight HOST:PORT") from None
        self.options = options
        self.latest = LatestResults(db_path, sealed=True)
        self._prepared: collections.OrderedDict[bytes, Prepared] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._stopped = False

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> int:
        """The port clients reach: gRPC's own threads answer them from construction on. Not
        ``serve()``: it installs C++ SIGINT/SIGTERM handlers over Python's, so Ctrl-C would shut the
        server down from a gRPC thread and never reach `weir run`'s main thread, which then waits
        for ever."""
        return self.port

    def stop(self) -> None:
        """Shut down once (pyarrow's ``shutdown`` must not be called twice), waiting for the RPCs
        under way."""
        if not self._stopped:
            self._stopped = True
            self.shutdown()

    # -- Flight RPCs ------------------------------------------------------------------
    def get_flight_info(self, context, descriptor):
        command = _command(descriptor)
        schema = self._schema(command)
        ticket = pb.TicketStatementQuery(command.query.encode("utf-8")).pack() \
            if isinstance(command, pb.CommandStatementQuery) else command.pack()
        return flight.FlightInfo(schema, descriptor, [flight.FlightEndpoint(ticket, [])], -1, -1)

    def get_schema(self, context, descriptor):
        return flight.SchemaResult(self._schema(_command(descriptor)))

    def do_get(self, context, ticket):
        command = _unpack(ticket.ticket)
        if isinstance(command, pb.TicketStatementQuery):
            try:
                query = command.statement_handle.decode("utf-8")
            except UnicodeDecodeError:
                raise pa.ArrowInvalid("the ticket's statement handle is not a query this server issued") from None
            return self._stream(query, [[]])
        if isinstance(command, pb.CommandPreparedStatementQuery):
            prepared = self._prepared_statement(command.prepared_statement_handle)
            return self._stream(prepared.query, prepared.parameters)
        if isinstance(command, _CATALOG_COMMANDS):
            return flight.RecordBatchStream(self._read(lambda cursor: catalog.answer(cursor, command)))
        raise pa.ArrowInvalid(f"{command.name()} is no ticket: DoGet takes the ticket GetFlightInfo returned")

    def do_put(self, context, descriptor, reader, writer):
        command = _command(descriptor)
        if isinstance(command, _WRITES):
            raise _read_only(command.name())
        if not isinstance(command, pb.CommandPreparedStatementQuery):
            raise pa.ArrowInvalid(f"{command.name()} is not answered by DoPut: it binds parameters of a prepared "
                                  "statement (CommandPreparedStatementQuery)")
        prepared = self._prepared_statement(command.prepared_statement_handle)
        bound = reader.read_all()
        # Parameters, not answers: a few values per execution, turned to Python for DuckDB's binding.
        prepared.parameters = [list(row.values()) for row in bound.to_pylist()]

    def list_actions(self, context):
        return [("CreatePreparedStatement", "check and describe a SELECT, kept under a handle"),
                ("ClosePreparedStatement", "forget a prepared statement")]

    def do_action(self, context, action):
        if action.type == "CreatePreparedStatement":
            request = _unpack(action.body.to_pybytes())
            if not isinstance(request, pb.ActionCreatePreparedStatementRequest):
                raise pa.ArrowInvalid(f"CreatePreparedStatement takes ActionCreatePreparedStatementRequest, "
                                      f"not {request.name()}")
            schema = self._describe(request.query)
            handle = secrets.token_bytes(16)
            with self._lock:
                self._prepared[handle] = Prepared(request.query, schema)
                while len(self._prepared) > MAX_PREPARED:
                    self._prepared.popitem(last=False)
            result = pb.ActionCreatePreparedStatementResult(handle, schema.serialize().to_pybytes())
            return [flight.Result(result.pack())]
        if action.type == "ClosePreparedStatement":
            request = _unpack(action.body.to_pybytes())
            if not isinstance(request, pb.ActionClosePreparedStatementRequest):
                raise pa.ArrowInvalid(f"ClosePreparedStatement takes ActionClosePreparedStatementRequest, "
                                      f"not {request.name()}")
            with self._lock:
                self._prepared.pop(request.prepared_statement_handle, None)
            return []
        if action.type in ("BeginTransaction", "EndTransaction", "BeginSavepoint", "EndSavepoint"):
            raise NotImplementedError(f"{action.type}: weir's Flight SQL endpoint has no transactions "
                                      "(each query reads the latest committed checkpoint)")
        raise NotImplementedError(f"the action {action.type[:100]!r} is not answered here; "
                                  "CreatePreparedStatement and ClosePreparedStatement are")

    # -- queries ----------------------------------------------------------------------
    def _schema(self, command: pb.Message) -> pa.Schema:
        if isinstance(command, pb.CommandStatementQuery):
            return self._describe(command.query)
        if isinstance(command, pb.CommandPreparedStatementQuery):
            return self._prepared_statement(command.prepared_statement_handle).schema
        if isinstance(command, _CATALOG_COMMANDS):
            return catalog.schema_of(command)
        if isinstance(command, _WRITES):
            raise _read_only(command.name())
        raise NotImplementedError(f"{command.name()} is not answered by weir's Flight SQL endpoint")

    def _describe(self, query: str) -> pa.Schema:
        """The Arrow schema of ``query``'s answer, parameters taken as NULL."""
        def describe(cursor: duckdb.DuckDBPyConnection) -> pa.Schema:
            statement = _check(cursor, query)
            probe = [None] * len(statement.named_parameters)
            return cursor.sql(query, params=probe or None).limit(0).to_arrow_table().schema
        return self._read(describe)

    def _stream(self, query: str, parameter_rows: list[list]) -> flight.FlightDataStream:
        """The answer as a stream of record batches: once per parameter row, read as sent."""
        cursor = self.latest.cursor()
        try:
            _check(cursor, query)
            readers = iter(parameter_rows)
            reader = _reader(cursor, query, next(readers, None))
        except BaseException as error:
            failure = _flight_error(error, cursor)
            cursor.close()
            raise failure from None
        if reader is None:  # no parameter rows bound: an empty answer of the prepared schema
            cursor.close()
            return flight.RecordBatchStream(self._describe(query).empty_table())

        def batches():
            try:
                yield from reader
                for parameters in readers:
                    yield from _reader(cursor, query, parameters)
            except duckdb.Error as error:
                raise _flight_error(error) from None
            finally:
                cursor.close()
        return flight.GeneratorStream(reader.schema, batches())

    def _read(self, work):
        cursor = self.latest.cursor()
        try:
            return work(cursor)
        except BaseException as error:
            raise _flight_error(error, cursor) from None
        finally:
            cursor.close()

    def _prepared_statement(self, handle: bytes) -> Prepared:
        with self._lock:
            prepared = self._prepared.get(handle)
        if prepared is None:
            raise KeyError("no prepared statement has this handle (closed, or forgotten past "
                           f"{MAX_PREPARED} open ones): prepare the query again")
        return prepared


def _command(descriptor: flight.FlightDescriptor) -> pb.Message:
    if descriptor.descriptor_type != flight.DescriptorType.CMD:
        raise pa.ArrowInvalid("weir's Flight SQL endpoint takes command descriptors (Flight SQL commands), "
                              "not paths")
    return _unpack(descriptor.command)


def _unpack(data: bytes) -> pb.Message:
    try:
        return pb.unpack(data)
    except pb.ProtocolError as error:
        raise pa.ArrowInvalid(f"bad Flight SQL message: {error}") from None


def _check(cursor: duckdb.DuckDBPyConnection, query: str):
    """The query's one statement, if it is a SELECT; refused otherwise."""
    try:
        found = cursor.extract_statements(query)
    except duckdb.Error as error:
        raise _flight_error(error) from None
    if not found:
        raise pa.ArrowInvalid("the query is empty: send one SELECT")
    if len(found) != 1 or found[0].type != duckdb.StatementType.SELECT:
        what = found[0].type.name if len(found) == 1 else f"{len(found)} statements"
        raise _read_only(what)
    if "/" in query:  # '/' between integers divides as integers, as in a streaming query (Flink's meaning)
        cursor.execute("SET SESSION integer_division = true")
    return found[0]


def _reader(cursor: duckdb.DuckDBPyConnection, query: str, parameters: list | None) -> pa.RecordBatchReader | None:
    if parameters is None:
        return None
    return cursor.sql(query, params=parameters or None).to_arrow_reader(BATCH_ROWS)


def _read_only(what: str) -> flight.FlightUnauthorizedError:
    return flight.FlightUnauthorizedError(
        f"{what} is refused: weir's Flight SQL endpoint is read-only and answers one SELECT at a time over "
        "the result tables; to change results, change the job that writes them")


def _flight_error(error: BaseException, cursor: duckdb.DuckDBPyConnection | None = None) -> BaseException:
    """A DuckDB error as the Flight error a client can act on (a missing table: with the tables
    there are); others as they are."""
    if not isinstance(error, duckdb.Error):
        return error
    message = str(error).splitlines()[0]
    if isinstance(error, duckdb.CatalogException) and cursor is not None:
        tables = [row[0] for row in cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
            "AND table_name NOT LIKE '\\_weir%' ESCAPE '\\' ORDER BY 1").fetchall()]
        message += f"; the result tables: {', '.join(tables) or 'none (no job has committed results yet)'}"
    if isinstance(error, duckdb.PermissionException):
        return flight.FlightUnauthorizedError(f"{message} (the endpoint reads the result database only)")
    if isinstance(error, duckdb.InterruptException):
        return flight.FlightCancelledError(message)
    if isinstance(error, (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException,
                          duckdb.InvalidInputException, duckdb.ConversionException)):
        return pa.ArrowInvalid(message)
    return flight.FlightServerError(message)

"""One client connection of the Postgres endpoint (``server.py``): protocol 3.0
from startup to Terminate.

1. A client connects; the startup packet (after refusing SSL/GSS requests
   with 'N') names its user. With a password configured, SCRAM-SHA-256
   (``scram.py``) must succeed; the server then reports its parameters,
   a backend key (for CancelRequest) and ReadyForQuery.
2. Each statement is classified (``statements.py``) and answered: reads by
   DuckDB in a worker thread through ``ResultReader`` (the thread's cursor),
   weir's statements by the session under one lock, connect-time SET / SHOW /
   BEGIN here, SUBSCRIBE by a ``QuerySubscription`` streaming rows as its
   view's job commits.
3. The simple protocol (Query) and the extended one (Parse, Bind, Describe,
   Execute, Close, Sync, Flush) share that path; after an error in the
   extended protocol every message up to Sync is skipped, as Postgres does.
   Results are text, or binary per column where Bind asks and the type has a
   binary form.
4. Limits: a statement runs at most ``statement_timeout`` seconds (DuckDB's
   ``interrupt``), an answer has at most ``max_rows`` rows, a message at most
   ``max_message_bytes``. A malformed message, an unknown type or a length
   over the limit gets an error and closes that connection; the others go on.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import duckdb

from weir import __version__
from weir.engine.errors import EngineError
from weir.shell import splitter
from weir.shell.database import DatabaseError
from weir.shell.pgwire import catalog, lookup, messages as m, statements as st
from weir.shell.pgwire.messages import Body, MessageReader, ProtocolViolation
from weir.shell.pgwire.scram import MECHANISM, AuthenticationFailed
from weir.shell.pgwire.subscribe import PREFIX, QuerySubscription, copy_inner, copy_line, subscription_target
from weir.shell.pgwire.types import arrow_type_name, column_type, decode_parameter
from weir.shell.session import LiveQuery, Message, ResultTable
from weir.sql import parse
from weir.sql.statements import Show
from weir.sql.errors import WeirSqlError

if TYPE_CHECKING:  # the server makes the clients; a client only reads its server's state
    from weir.shell.pgwire.server import Server

log = logging.getLogger("weir.serve")

SSL_REQUEST, GSS_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102
_PARAMETER = re.compile(r"\$(\d+)")


class QueryError(Exception):
    def __init__(self, code: str, message: str, hint: str | None = None):
        super().__init__(message)
        self.code, self.message, self.hint = code, message, hint


@dataclass
class Answer:
    """A statement's answer: ``columns`` (name, DuckDB type) and rows, or None for a command."""
    columns: list[tuple[str, str]] | None
    rows: list[tuple] = field(default_factory=list)
    tag: str = ""
    notices: list[str] = field(default_factory=list)
    empty: bool = False


@dataclass
class Prepared:
    statement: st.Statement
    oids: list[int]


@dataclass
class Portal:
    prepared: Prepared
    params: list[Any]
    formats: list[int]
    answer: Answer | None = None
    sent: int = 0



class Client:
    """One client connection: its protocol state, settings and prepared statements."""

    def __init__(self, server: "Server", process_id: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter):
        self.server = server
        self.options = server.options
        self.process_id = process_id
        self.secret = secrets.randbits(31)
        self.messages = MessageReader(reader, server.options.max_message_bytes)
        self.writer = writer
        self.out = bytearray()
        self.settings = st.server_parameters(__version__)
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.transaction = b"I"  # I idle, T in a transaction block, E in a failed one
        self.skipping = False  # after an error in the extended protocol, until Sync
        self.cancelled = asyncio.Event()
        self.timeout = server.options.statement_timeout
        self.user = ""
        #: The SUBSCRIBE being streamed, if one is.
        self.subscription: QuerySubscription | None = None

    # -- output ----------------------------------------------------------------------
    def send(self, data: bytes) -> None:
        self.out += data

    async def flush(self) -> None:
        if self.out:
            self.writer.write(bytes(self.out))
            self.out.clear()
        await self.writer.drain()

    def close(self) -> None:
        self.writer.close()

    # -- the connection ------------------------------------------------------------------
    async def run(self) -> None:
        try:
            if len(self.server.clients) >= self.options.max_connections:
                self.send(m.error_response("53300", "sorry, too many clients already",
                                           "raise --max-connections, or close idle connections"))
                return
            if not await self._startup():
                return
            self.server.clients[self.process_id] = self
            while True:
                kind, body = await self.messages.message()
                if kind == b"X":
                    return
                await self._dispatch(kind, Body(body))
        except ProtocolViolation as error:
            self.out.clear()
            self.send(m.error_response("08P01", f"protocol violation: {error}; closing the connection"))
        except AuthenticationFailed as error:
            self.send(m.error_response("28P01", f"password authentication failed for user \"{self.user}\": {error}"))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as error:  # noqa: BLE001 - one connection's failure must not stop the server
            log.exception("connection %s failed", self.process_id)
            self.send(m.error_response("XX000", f"internal error: {error}"))
        finally:
            self.server.clients.pop(self.process_id, None)
            try:
                await self.flush()
            except (ConnectionError, RuntimeError):
                pass
            self.writer.close()

    async def _startup(self) -> bool:
        for _ in range(3):
            body = Body(await self.messages.startup())
            code = body.int32()
            if code in (SSL_REQUEST, GSS_REQUEST):
                self.writer.write(b"N")  # no TLS, no GSSAPI: the client goes on in the clear or gives up
                continue
            if code == CANCEL_REQUEST:
                self.server.cancel(body.int32(), body.uint32())
                return False
            if code >> 16 != 3:
                raise ProtocolViolation(f"unsupported protocol version {code >> 16}.{code & 0xFFFF}")
            params = {}
            while True:
                name = body.string()
                if not name:
                    break
                params[name] = body.string()
            break
        else:
            raise ProtocolViolation("too many SSL or GSS requests")
        self.user = user = params.get("user", "")
        if self.server.verifier is not None:
            await self._authenticate(user)
        self.settings["application_name"] = params.get("application_name", "")
        self.send(m.authentication(0))
        for name in st.REPORTED:
            self.send(m.parameter_status(name, self.settings[name]))
        self.send(m.backend_key_data(self.process_id, self.secret))
        self.send(m.ready_for_query(b"I"))
        await self.flush()
        return True

    async def _authenticate(self, user: str) -> None:
        exchange = self.server.verifier.exchange()
        self.send(m.authentication(10, m.cstring(MECHANISM) + b"\x00"))
        await self.flush()
        body = await self._password_message()
        mechanism = body.string()
        if mechanism != MECHANISM:
            raise AuthenticationFailed(f"the server wants {MECHANISM}, not {mechanism}")
        length = body.int32()
        first = exchange.first(body.raw(length).decode(errors="replace"))
        self.send(m.authentication(11, first.encode()))
        await self.flush()
        final = exchange.final((await self._password_message()).data.decode(errors="replace"))
        self.send(m.authentication(12, final.encode()))
        log.info("user %r authenticated", user)

    async def _password_message(self) -> Body:
        kind, body = await self.messages.message()
        if kind != b"p":
            raise ProtocolViolation(f"expected a password message, got {kind!r}")
        return Body(body)

    async def _dispatch(self, kind: bytes, body: Body) -> None:
        if kind == b"Q":
            await self._simple_query(body.string())
            return
        if kind == b"S":
            self.skipping = False
            self.portals.pop("", None)
            self.send(m.ready_for_query(self.transaction))
            await self.flush()
            return
        if kind == b"H":
            await self.flush()
            return
        if kind in (b"d", b"c", b"f"):
            return  # COPY IN data outside COPY IN: ignored, as Postgres does
        handler = {b"P": self._parse, b"B": self._bind, b"D": self._describe, b"E": self._execute,
                   b"C": self._close}.get(kind)
        if handler is None:
            raise ProtocolViolation(f"unknown message type {kind!r}")
        if self.skipping:
            return
        try:
            await handler(body)
        except QueryError as error:
            self._fail(error)
        if len(self.out) > 65536:
            await self.flush()

    def _fail(self, error: QueryError) -> None:
        self.send(m.error_response(error.code, error.message, error.hint))
        self.skipping = True
        if self.transaction == b"T":
            self.transaction = b"E"

    # -- the simple protocol ------------------------------------------------------------
    async def _simple_query(self, text: str) -> None:
        chunks = [c.text for c in splitter.split(text) if st.strip_comments(c.text)] or [""]
        try:
            for chunk in chunks:
                statement = st.classify(chunk)
                if statement.kind in (st.SUBSCRIBE, st.COPY_SUBSCRIBE):
                    await self._subscribe(statement, [], copy=statement.kind == st.COPY_SUBSCRIBE)
                    continue
                answer = await self._answer(statement, [])
                self._send_answer(answer, [0], 0, 0)
                await self.flush()
        except QueryError as error:
            self.send(m.error_response(error.code, error.message, error.hint))
            if self.transaction == b"T":
                self.transaction = b"E"
        self.send(m.ready_for_query(self.transaction))
        await self.flush()

    # -- the extended protocol ------------------------------------------------------------
    async def _parse(self, body: Body) -> None:
        name, sql = body.string(), body.string()
        oids = [body.uint32() for _ in range(body.count("parameter types"))]
        self.prepared[name] = Prepared(st.classify(sql), oids)
        self.send(m.PARSE_COMPLETE)

    async def _bind(self, body: Body) -> None:
        portal, name = body.string(), body.string()
        formats = [body.int16() for _ in range(body.count("parameter formats"))]
        values = [body.raw(length) if (length := body.int32()) >= 0 else None
                  for _ in range(body.count("parameters"))]
        result_formats = [body.int16() for _ in range(body.count("result formats"))]
        prepared = self.prepared.get(name)
        if prepared is None:
            raise QueryError("26000", f"prepared statement \"{name}\" does not exist")
        if len(formats) not in (0, 1, len(values)):
            raise ProtocolViolation(f"{len(formats)} parameter formats for {len(values)} parameters")
        params = []
        for i, value in enumerate(values):
            binary = (formats[i] if len(formats) > 1 else formats[0] if formats else 0) == 1
            oid = prepared.oids[i] if i < len(prepared.oids) else 0
            try:
                params.append(None if value is None else decode_parameter(value, oid, binary))
            except (ValueError, UnicodeDecodeError, ArithmeticError) as error:
                raise QueryError("22P02", f"parameter ${i + 1}: {error}") from None
        self.portals[portal] = Portal(prepared, params, result_formats)
        self.send(m.BIND_COMPLETE)

    async def _describe(self, body: Body) -> None:
        what, name = body.byte(), body.string()
        if what == b"S":
            prepared = self.prepared.get(name)
            if prepared is None:
                raise QueryError("26000", f"prepared statement \"{name}\" does not exist")
            count = max([len(prepared.oids), *map(int, _PARAMETER.findall(prepared.statement.sql))])
            oids = [(prepared.oids[i] if i < len(prepared.oids) else 0) or 25 for i in range(count)]
            self.send(m.parameter_description(oids))
            columns = await self._columns(prepared.statement, [None] * count)
            self._send_description(columns, [0])
        elif what == b"P":
            portal = self.portals.get(name)
            if portal is None:
                raise QueryError("34000", f"portal \"{name}\" does not exist")
            if portal.prepared.statement.kind in (st.SUBSCRIBE, st.COPY_SUBSCRIBE):
                columns = await self._columns(portal.prepared.statement, portal.params)
            else:
                portal.answer = portal.answer or await self._answer(portal.prepared.statement, portal.params)
                columns = portal.answer.columns
            self._send_description(columns, portal.formats)
        else:
            raise ProtocolViolation(f"Describe of {what!r}")

    async def _execute(self, body: Body) -> None:
        name, limit = body.string(), body.int32()
        portal = self.portals.get(name)
        if portal is None:
            raise QueryError("34000", f"portal \"{name}\" does not exist")
        statement = portal.prepared.statement
        if statement.kind in (st.SUBSCRIBE, st.COPY_SUBSCRIBE):
            await self._subscribe(statement, portal.formats, copy=statement.kind == st.COPY_SUBSCRIBE,
                                  described=True)
            return
        if portal.answer is None:
            portal.answer = await self._answer(statement, portal.params)
        portal.sent = self._send_answer(portal.answer, portal.formats, portal.sent, limit, describe=False)

    async def _close(self, body: Body) -> None:
        what, name = body.byte(), body.string()
        (self.prepared if what == b"S" else self.portals).pop(name, None)
        self.send(m.CLOSE_COMPLETE)

    # -- answers -------------------------------------------------------------------------
    def _send_description(self, columns: list[tuple[str, str]] | None, formats: list[int]) -> None:
        if columns is None:
            self.send(m.NO_DATA)
            return
        fields = []
        for i, (name, type_name) in enumerate(columns):
            pg = column_type(type_name)
            binary = _format(formats, i) == 1 and pg.binary is not None
            fields.append((name, pg.oid, pg.size, pg.modifier, 1 if binary else 0))
        self.send(m.row_description(fields))

    def _send_answer(self, answer: Answer, formats: list[int], start: int, limit: int,
                     describe: bool = True) -> int:
        """Send an answer's notices, description (simple protocol), rows from ``start`` (at most
        ``limit``, 0 for all) and completion; return how many rows have been sent in all."""
        for notice in answer.notices:
            self.send(m.notice_response(notice))
        if answer.empty:
            self.send(m.EMPTY_QUERY)
            return 0
        if answer.columns is None:
            self.send(m.command_complete(answer.tag))
            return 0
        if describe:
            self._send_description(answer.columns, formats)
        end = len(answer.rows) if limit <= 0 else min(len(answer.rows), start + limit)
        self.send(encode_rows(answer.columns, formats, answer.rows[start:end]))
        if end < len(answer.rows):
            self.send(m.PORTAL_SUSPENDED)
        else:
            self.send(m.command_complete(answer.tag or f"SELECT {len(answer.rows)}"))
        return end

    async def _answer(self, statement: st.Statement, params: list[Any]) -> Answer:
        kind = statement.kind
        if self.transaction == b"E" and kind != st.TRANSACTION:
            raise QueryError("25P02", "current transaction is aborted, commands ignored until end of "
                             "transaction block", "send ROLLBACK")
        if kind == st.EMPTY:
            return Answer(None, empty=True)
        if kind == st.READ:
            found = lookup.shape(statement.sql) if self.options.point_lookups else None
            if found is not None:
                answer = await self._lookup(statement.sql, found, params)
                if answer is not None:
                    return answer
            return await self._guarded(lambda cancel: self._read(statement.sql, params, cancel))
        if kind in (st.WEIR_READ, st.WEIR_WRITE):
            if kind == st.WEIR_WRITE and not self.options.allow_writes:
                raise QueryError("25006", f"{statement.tag} is refused: this endpoint is read-only",
                                 "start the server with --allow-writes to run statements that change things")
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self.server.queries, self._weir, statement.sql)
        if kind == st.TRANSACTION:
            return self._transaction(statement)
        if kind == st.SET:
            return self._set(statement)
        if kind == st.SHOW:
            return self._show(statement)
        if kind in (st.SUBSCRIBE, st.COPY_SUBSCRIBE):
            raise QueryError("0A000", "SUBSCRIBE cannot run here", "send it alone")
        return Answer(None, tag=statement.tag)

    async def _lookup(self, sql: str, found: lookup.Shape, params: list[Any]) -> Answer | None:
        """A point lookup answered from the snapshot's index (``lookup.py``), on this thread once
        the statement's plan is built; None when DuckDB must answer it."""
        lookups = self.server.lookups
        answer = lookups.answer(sql, found, params)
        if answer is lookup.UNPREPARED:
            await self._guarded(lambda holder: lookups.prepare(sql, found, params))
            answer = lookups.answer(sql, found, params)
        if answer is None or answer is lookup.UNPREPARED:  # not one, or a newer snapshot meanwhile
            return None
        columns, rows = answer
        if len(rows) > self.options.max_rows:
            raise QueryError("54000", f"the answer has more than {self.options.max_rows:,} rows",
                             "add a LIMIT or a WHERE, or raise --max-rows")
        return Answer(columns, rows, f"SELECT {len(rows)}")

    async def _columns(self, statement: st.Statement, params: list[Any]) -> list[tuple[str, str]] | None:
        """The columns a statement will answer with, without running it where that is possible."""
        if statement.kind == st.READ:
            sql = statement.sql
            answer = await self._guarded(lambda cancel: self._read(sql, params, cancel, describe=True))
            return answer.columns
        if statement.kind in (st.SUBSCRIBE, st.COPY_SUBSCRIBE):
            _, query = self._subscription_target(statement)
            answer = await self._guarded(lambda cancel: self._read(query, [], cancel, describe=True))
            return PREFIX + answer.columns
        if statement.kind in (st.SHOW, st.WEIR_READ):
            return (await self._answer(statement, params)).columns
        return None

    async def _guarded(self, work: Callable[[list], Answer]) -> Answer:
        """Run ``work`` in a query thread, interrupting it past the statement timeout or on a
        CancelRequest. ``work`` gets a list where it puts its cursor, for interrupting."""
        loop = asyncio.get_running_loop()
        holder: list = []
        self.cancelled.clear()
        future = loop.run_in_executor(self.server.queries, work, holder)
        cancel = asyncio.ensure_future(self.cancelled.wait())
        try:
            done, _ = await asyncio.wait({future, cancel}, timeout=self.timeout or None,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancel.cancel()
        if future in done:
            return future.result()
        holder.append(None)  # tells work that has not started its query yet not to
        for cursor in holder:
            if cursor is not None:
                cursor.interrupt()
        try:
            await future
        except (QueryError, duckdb.Error):
            pass
        if self.cancelled.is_set():
            raise QueryError("57014", "canceling statement due to user request")
        limit = self.options.statement_timeout
        if limit and self.timeout >= limit:
            raise_it = "the server's --statement-timeout"
        else:  # this connection's SET lowered it
            raise_it = "this connection's SET statement_timeout" + (f" (the server allows {limit:g} s)" if limit else "")
        raise QueryError("57014", f"canceling statement due to statement timeout ({self.timeout:g} s)",
                         f"make the query cheaper (a LIMIT, a WHERE on the key), or raise {raise_it}")

    def _read(self, sql: str, params: list[Any], holder: list, describe: bool = False) -> Answer:
        """A read of the result database (a query thread)."""
        try:
            with self.server.reader.cursor() as cursor:
                if None in holder:
                    raise QueryError("57014", "canceling statement")
                holder.append(cursor)
                try:
                    return self._query(cursor, sql, params, describe)
                except duckdb.CatalogException as error:
                    raise QueryError("42P01", _first_line(error), self._tables_hint(cursor)) from None
        except duckdb.InterruptException:
            raise QueryError("57014", "canceling statement") from None
        except duckdb.PermissionException as error:
            raise QueryError("42501", _first_line(error), "the endpoint reads the result database only") from None
        except duckdb.ParserException as error:
            raise QueryError("42601", _first_line(error)) from None
        except duckdb.Error as error:
            raise QueryError("42000", _first_line(error)) from None
        except DatabaseError as error:
            raise QueryError("55006", error.message, error.hint) from None

    def _query(self, cursor: duckdb.DuckDBPyConnection, sql: str, params: list[Any], describe: bool) -> Answer:
        if catalog.wanted(sql):
            sql = catalog.prepare(cursor, sql)
        what = _refused(cursor, sql)
        if what is not None:
            raise QueryError("25006", f"{what} is refused: this endpoint answers queries (SELECT) "
                             "over the result tables, and weir's own statements",
                             "to change results, change the job that writes them")
        if "/" in sql:
            cursor.execute("SET SESSION integer_division = true")
        if describe:
            count = max([len(params), *map(int, _PARAMETER.findall(sql))])
            probe = list(params) + [None] * (count - len(params))
            # A relation is described without running (a subquery would rename repeated columns).
            relation = cursor.sql(sql, params=probe or None)
            return Answer([(name, str(type_)) for name, type_ in zip(relation.columns, relation.types)])
        cursor.execute(sql, params or None)
        columns = [(d[0], str(d[1])) for d in cursor.description]
        rows = cursor.fetchmany(self.options.max_rows + 1)
        if len(rows) > self.options.max_rows:
            raise QueryError("54000", f"the answer has more than {self.options.max_rows:,} rows",
                             "add a LIMIT or a WHERE, or raise --max-rows")
        return Answer(columns, rows, f"SELECT {len(rows)}")

    @staticmethod
    def _tables_hint(cursor: duckdb.DuckDBPyConnection) -> str:
        tables = [row[0] for row in cursor.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_name NOT LIKE '\\_weir%' ESCAPE '\\' "
            "ORDER BY 1").fetchall()]
        return f"the result tables: {', '.join(tables) or 'none'}"

    def _weir(self, sql: str) -> Answer:
        """A weir statement, answered by the session as the shell answers it (a query thread)."""
        answers = []
        try:
            with self.server.session_lock:
                for statement in parse(sql):
                    reply = self.server.connection.reply(statement)
                    if isinstance(statement, Show) and isinstance(reply, Message) and \
                            statement.what.upper().startswith("CREATE "):
                        # The shell prints the statement; a client gets it as a row (Flink's SQL
                        # gateway names the column ``result``).
                        answers.append(Answer([("result", "VARCHAR")], [(reply.text,)], "SELECT 1"))
                        continue
                    answers.append(self._reply(reply, st.classify(getattr(statement, "text", "") or sql).tag))
        except WeirSqlError as error:
            problem = error.problems[0]
            raise QueryError("42601", problem.message, problem.hint) from None
        except (EngineError, DatabaseError) as error:
            raise QueryError("XX000", error.message, error.hint) from None
        answer = answers[-1] if answers else Answer(None, tag=st.classify(sql).tag)
        answer.notices = [n for a in answers for n in a.notices]
        return answer

    def _reply(self, reply: Any, tag: str) -> Answer:
        if isinstance(reply, ResultTable):
            table = reply.table
            columns = [(f.name, arrow_type_name(f.type)) for f in table.schema]
            rows = list(zip(*(table.column(i).to_pylist() for i in range(table.num_columns))))
            return Answer(columns, rows, f"SELECT {len(rows)}")
        if isinstance(reply, LiveQuery):
            self.server.connection.session.jobs.cancel(reply.job)
            raise QueryError("0A000", "a SELECT over a streaming source does not end",
                             "CREATE MATERIALIZED VIEW v AS ..., then SELECT from v or SUBSCRIBE TO v")
        return Answer(None, tag=tag, notices=[reply.text])

    def _transaction(self, statement: st.Statement) -> Answer:
        tag = statement.tag
        if tag == "BEGIN":
            self.transaction = b"T"
        elif tag in ("COMMIT", "ROLLBACK"):
            tag = "ROLLBACK" if self.transaction == b"E" else tag
            self.transaction = b"I"
        return Answer(None, tag=tag)

    def _set(self, statement: st.Statement) -> Answer:
        if statement.words[0] == "reset":
            return Answer(None, tag="RESET")
        found = st.parse_set(statement.sql)
        if found is not None:
            name, value = found
            known = {k.lower(): k for k in self.settings}
            self.settings[known.get(name.lower(), name)] = value
            if name.lower() == "statement_timeout":
                seconds = st.timeout_seconds(value)
                if seconds is None:
                    raise QueryError("22023", f"invalid value for statement_timeout: \"{value}\"",
                                     "e.g. SET statement_timeout = '5s' (a bare number is milliseconds)")
                limit = self.options.statement_timeout
                self.timeout = min(seconds, limit) if seconds and limit else (seconds or limit)
        return Answer(None, tag="SET")

    def _show(self, statement: st.Statement) -> Answer:
        name = st.parse_show(statement.sql)
        if name.lower() == "all":
            keys = sorted(self.settings, key=str.lower)
            return Answer([("name", "VARCHAR"), ("setting", "VARCHAR")], [(k, self.settings[k]) for k in keys], "SHOW")
        known = {k.lower(): k for k in self.settings}
        if name.lower() not in known:
            raise QueryError("42704", f"unrecognized configuration parameter \"{name}\"",
                             "SHOW JOBS, TABLES, VIEWS, FUNCTIONS, CATALOGS, DATABASES and CREATE TABLE t "
                             "are weir's; SHOW ALL lists the settings")
        return Answer([(name, "VARCHAR")], [(self.settings[known[name.lower()]],)], "SHOW")

    # -- SUBSCRIBE -------------------------------------------------------------------------
    def _subscription_target(self, statement: st.Statement) -> tuple[str, str]:
        try:
            text = copy_inner(statement.sql) if statement.kind == st.COPY_SUBSCRIBE else \
                statement.sql.split(None, 1)[1] if len(statement.sql.split(None, 1)) > 1 else ""
            return subscription_target(text)
        except WeirSqlError as error:
            raise QueryError("42601", error.problems[0].message, error.problems[0].hint) from None

    async def _subscribe(self, statement: st.Statement, formats: list[int], *, copy: bool,
                         described: bool = False) -> None:
        """Stream the view's changes until its job ends, the client cancels or hangs up."""
        view, query = self._subscription_target(statement)
        columns = await self._columns(statement, [])
        if copy:
            self.send(m.copy_out_response(len(columns)))
        elif not described:
            self._send_description(columns, formats)
        await self.flush()
        subscription = QuerySubscription(self.server.connection, view, query, self.server.reader,
                                         self.options.subscribe_interval)
        loop = asyncio.get_running_loop()
        texts = [column_type(t).text for _, t in columns]
        count = 0
        self.cancelled.clear()
        self.subscription = subscription
        try:
            while True:
                upcoming = loop.run_in_executor(self.server.streams, _next_batch, subscription)
                while True:
                    reading = self.messages.reading()  # what the client sends meanwhile is kept
                    cancel = asyncio.ensure_future(self.cancelled.wait())
                    done, _ = await asyncio.wait({upcoming, reading, cancel}, return_when=asyncio.FIRST_COMPLETED)
                    cancel.cancel()
                    if upcoming in done:
                        break
                    if reading in done and not self.messages.took():
                        raise ConnectionResetError("the client hung up")
                    if self.cancelled.is_set():
                        raise QueryError("57014", "canceling statement due to user request")
                batch = upcoming.result()
                if batch is None:
                    break
                rows = subscription.rows(batch)
                count += len(rows)
                if copy:
                    self.send(b"".join(m.copy_data(copy_line([None if v is None else text(v)
                                                              for text, v in zip(texts, row)])) for row in rows))
                else:
                    self.send(encode_rows(columns, formats, rows))
                await self.flush()
        finally:
            self.subscription = None
            subscription.close()
        if copy:
            self.send(m.COPY_DONE)
        self.send(m.command_complete(f"COPY {count}" if copy else f"SUBSCRIBE {count}"))


_REFUSED: dict[str, str | None] = {}  # by statement text: DuckDB's parse costs ~0.15 ms


def _refused(cursor: duckdb.DuckDBPyConnection, sql: str) -> str | None:
    """What ``sql`` is, when DuckDB's parser finds it is not one SELECT; None when it is."""
    if sql not in _REFUSED:
        found = cursor.extract_statements(sql)
        if len(_REFUSED) >= 4096:
            _REFUSED.clear()
        _REFUSED[sql] = None if len(found) == 1 and found[0].type == duckdb.StatementType.SELECT else \
            found[0].type.name if len(found) == 1 else f"{len(found)} statements"
    return _REFUSED[sql]


def _next_batch(subscription: QuerySubscription):
    try:
        return next(subscription)
    except StopIteration:
        return None


def _format(formats: list[int], i: int) -> int:
    if not formats:
        return 0
    return formats[0] if len(formats) == 1 else formats[i] if i < len(formats) else 0


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0]


def encode_rows(columns: list[tuple[str, str]], formats: list[int], rows: list[tuple]) -> bytes:
    """DataRow messages of ``rows``: each column in the format Bind asked for where its type has
    a binary form, else as text (as its RowDescription said)."""
    encoders = []
    for i, (_, type_name) in enumerate(columns):
        pg = column_type(type_name)
        if _format(formats, i) == 1 and pg.binary is not None:
            encoders.append(pg.binary)
        else:
            encoders.append(lambda v, text=pg.text: text(v).encode())
    pairs = list(zip(encoders, range(len(encoders))))
    return b"".join(m.data_row([None if row[i] is None else encode(row[i]) for encode, i in pairs]) for row in rows)

"""The Postgres endpoint: an asyncio server speaking protocol 3.0 to `psql`,
psycopg, JDBC and BI tools, answering from the result database and the weir
session. ``Server`` listens, keeps the query and subscription thread pools,
the session lock and the clients by process id (for CancelRequest); each
connection is a ``Client`` (``client.py``).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import secrets
import socket
import threading
from typing import Callable

from weir.shell.api import Connection
from weir.shell.pgwire.client import Client
from weir.shell.pgwire.lookup import PointLookups
from weir.shell.pgwire.options import ServeError, ServeOptions, check_listen
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.scram import Verifier

__all__ = ["Server", "ServeOptions", "ServeError", "check_listen"]


class Server:
    def __init__(self, connection: Connection, reader: ResultReader, options: ServeOptions):
        check_listen(options.host, options.password)
        self.connection = connection
        self.reader = reader
        self.lookups = PointLookups(reader)
        self.options = options
        self.verifier = Verifier(options.password) if options.password else None
        self.queries = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="weir-pg-query")
        self.streams = concurrent.futures.ThreadPoolExecutor(options.max_connections,
                                                             thread_name_prefix="weir-pg-subscribe")
        self.session_lock = threading.Lock()
        self.clients: dict[int, Client] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task] = set()  # one per connection
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port = options.port

    # -- lifecycle -----------------------------------------------------------------
    async def start(self) -> None:
        try:
            self._server = await asyncio.start_server(self._accept, self.options.host, self.options.port)
        except OSError as error:
            raise ServeError(f"cannot listen on {self.options.host}:{self.options.port}: {error.strerror}",
                             "choose another with --listen HOST:PORT") from None
        self.port = self._server.sockets[0].getsockname()[1]
        self._loop = asyncio.get_running_loop()

    def serve_forever(self, listening: Callable[[int], None] | None = None) -> None:
        """Serve in this thread until interrupted (`weir serve`); ``listening(port)`` once it listens."""
        async def main() -> None:
            await self.start()
            if listening is not None:
                listening(self.port)
            async with self._server:
                await self._server.serve_forever()
        try:
            asyncio.run(main())
        except KeyboardInterrupt:
            pass
        finally:
            self._shutdown_pools()

    def start_in_thread(self) -> int:
        """Serve from a daemon thread (`weir run --serve`, tests); return the port once listening."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as error:  # noqa: BLE001 - handed to the starting thread
                failure.append(error)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="weir-pg-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self.port

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and self._thread is not None:
            async def close() -> None:
                self._server.close()
                for task in list(self._tasks):
                    task.cancel()
                await asyncio.gather(*self._tasks, return_exceptions=True)
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(10)
        self._shutdown_pools()

    def _shutdown_pools(self) -> None:
        self.queries.shutdown(wait=False, cancel_futures=True)
        self.streams.shutdown(wait=False, cancel_futures=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client = Client(self, next(self._ids), reader, writer)
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await client.run()
        except asyncio.CancelledError:
            pass  # the server stops: the connection's task ends quietly (asyncio logs it otherwise)
        finally:
            self._tasks.discard(task)

    def cancel(self, process_id: int, secret: int) -> None:
        client = self.clients.get(process_id)
        if client is not None and secrets.compare_digest(client.secret.to_bytes(4, "big"), secret.to_bytes(4, "big")):
            client.cancelled.set()

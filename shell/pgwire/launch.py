"""`weir serve` and `weir run --serve`: the endpoint's options from the command line."""
from __future__ import annotations

import os
import sys
import threading

from weir.shell.api import Connection
from weir.shell.pgwire.results import ResultReader
from weir.shell.pgwire.server import Server, ServeError, ServeOptions

__all__ = ["ServeError", "serve", "start_beside", "keep_serving", "report"]

DEFAULT_LISTEN = "127.0.0.1:5433"
PASSWORD_VARIABLE = "WEIR_PASSWORD"


def listen_address(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``PORT`` (on 127.0.0.1)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) < 65536:
        raise ServeError(f"--listen {text!r}: the port must be a number below 65536", "e.g. --listen 127.0.0.1:5433")
    return host, int(port)


def password(args) -> str | None:
    """--password-file's first line, else $WEIR_PASSWORD, else None (no authentication)."""
    if getattr(args, "password_file", None):
        try:
            with open(args.password_file, encoding="utf-8") as file:
                text = file.readline().rstrip("\r\n")
        except OSError as error:
            raise ServeError(f"cannot read the password file {args.password_file}: {error.strerror}") from None
        if not text:
            raise ServeError(f"the password file {args.password_file} is empty", "write the password on its first line")
        return text
    return os.environ.get(PASSWORD_VARIABLE) or None


def options(args) -> ServeOptions:
    host, port = listen_address(args.listen)
    return ServeOptions(host=host, port=port, password=password(args), allow_writes=args.allow_writes,
                        statement_timeout=args.statement_timeout, max_rows=args.max_rows)


def serve(args) -> int:
    """`weir serve`: answer Postgres clients from the database until interrupted."""
    try:
        server = Server(Connection(args.db), ResultReader(args.db, beside_jobs=False), options(args))
    except ServeError as error:
        return report(error)
    try:
        server.serve_forever(lambda port: _announce(server, args.db, port))
    except ServeError as error:
        return report(error)
    return 0


def start_beside(connection: Connection, args) -> Server:
    """`weir run --serve`: serve from a thread beside the job, over the job's connection."""
    server = Server(connection, ResultReader(args.db, beside_jobs=True), options(args))
    _announce(server, args.db, server.start_in_thread())
    return server


def keep_serving(server: Server) -> None:
    """After the job has ended: serve its results until Ctrl-C."""
    print(f"the job has ended; still serving on {server.options.host}:{server.port} (Ctrl-C stops)",
          file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def _announce(server: Server, db: str, port: int) -> None:
    auth = "SCRAM-SHA-256 password" if server.options.password else "no password"
    mode = "reads and writes" if server.options.allow_writes else "read-only"
    print(f"serving {db} to Postgres clients on {server.options.host}:{port} ({auth}, {mode}); "
          f"psql -h {server.options.host} -p {port}", file=sys.stderr, flush=True)


def report(error: ServeError) -> int:
    print(f"weir: {error.message}", file=sys.stderr)
    if error.hint:
        print(f"  hint: {error.hint}", file=sys.stderr)
    return 1

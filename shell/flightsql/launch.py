"""`weir serve --flight HOST:PORT`: the Flight SQL endpoint's options from the command line."""
from __future__ import annotations

import sys

from weir.shell.flightsql.server import FlightOptions, FlightSqlServer
from weir.shell.pgwire.launch import listen_address, password
from weir.shell.pgwire.options import ServeError

DEFAULT_PORT = 8815


def start(args) -> FlightSqlServer:
    """Listen for Flight SQL clients (the server's gRPC threads answer them) and say where."""
    try:
        host, port = listen_address(args.flight)
    except ServeError:
        raise ServeError(f"--flight {args.flight!r}: the port must be a number below 65536",
                         f"e.g. --flight 127.0.0.1:{DEFAULT_PORT}") from None
    server = FlightSqlServer(args.db, FlightOptions(host=host, port=port, password=password(args)))
    port = server.start()
    url = f"grpc://{f'[{host}]' if ':' in host else host}:{port}"
    auth = "password" if server.options.password else "no password"
    print(f"serving {args.db} to Arrow Flight SQL clients on {url} ({auth}, read-only); "
          f"adbc_driver_flightsql.dbapi.connect({url!r})", file=sys.stderr, flush=True)
    return server

"""The Postgres endpoint's settings, and the rule for where it may listen."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 5433
    password: str | None = None
    allow_writes: bool = False
    statement_timeout: float = 30.0
    max_rows: int = 1_000_000
    max_message_bytes: int = 1 << 20
    max_connections: int = 64
    #: Seconds between reads of a view that no job of this process maintains (SUBSCRIBE).
    subscribe_interval: float = 1.0
    #: Answer ``SELECT cols FROM table WHERE key = $1`` from an in-memory index of the
    #: snapshot (``lookup.py``) instead of DuckDB; off only to compare the two.
    point_lookups: bool = True


class ServeError(Exception):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


def check_listen(host: str, password: str | None) -> None:
    """Listening beyond this machine needs a password: refuse otherwise, saying how to give one."""
    if password:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ServeError(f"refusing to listen on {host} without a password: anyone who can reach it could "
                         "read every result", "give one with --password-file FILE or the WEIR_PASSWORD "
                         "variable, or listen on 127.0.0.1")

"""Password authentication for the Flight SQL endpoint, as Flight clients do it: HTTP Basic
(any user name, the endpoint's password) on the first call — ADBC's driver sends it in a
Handshake — answered with a bearer token that the client sends on every later call.

``PasswordAuth`` is a Flight server middleware: each call's ``authorization`` header
is looked at before the call runs; a call without a good one is refused with
UNAUTHENTICATED. Tokens are random (32 bytes), kept in memory for the server's life
(at most ``MAX_TOKENS``, the oldest forgotten first); a password is compared in
constant time.
"""
from __future__ import annotations

import base64
import binascii
import collections
import hmac
import secrets
import threading

import pyarrow.flight as flight

MAX_TOKENS = 10_000


class _IssuedToken(flight.ServerMiddleware):
    def __init__(self, token: str):
        self.token = token

    def sending_headers(self):
        return {"authorization": f"Bearer {self.token}"}


class PasswordAuth(flight.ServerMiddlewareFactory):
    def __init__(self, password: str):
        self._password = password.encode("utf-8")
        self._tokens: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    def start_call(self, info, headers):
        values = headers.get("authorization") or headers.get("Authorization") or [""]
        scheme, _, credentials = values[0].partition(" ")
        if scheme.lower() == "bearer":
            with self._lock:
                if credentials in self._tokens:
                    return None
            raise flight.FlightUnauthenticatedError("the bearer token is not one this server issued: "
                                                    "authenticate again with the password")
        if scheme.lower() == "basic" and self._password_matches(credentials):
            token = secrets.token_urlsafe(32)
            with self._lock:
                self._tokens[token] = None
                while len(self._tokens) > MAX_TOKENS:
                    self._tokens.popitem(last=False)
            return _IssuedToken(token)
        raise flight.FlightUnauthenticatedError(
            "weir's Flight SQL endpoint needs its password: any user name and the password of --password-file "
            "or $WEIR_PASSWORD (ADBC: db_kwargs={'username': ..., 'password': ...})")

    def _password_matches(self, credentials: str) -> bool:
        try:
            decoded = base64.b64decode(credentials, validate=True)
        except (binascii.Error, ValueError):
            return False
        _, sep, password = decoded.partition(b":")
        return bool(sep) and hmac.compare_digest(password, self._password)


class HandshakeAnswer(flight.ServerAuthHandler):
    """Answers the Handshake that a client sends to log in (ADBC's driver with a user name and
    password), which would otherwise be UNIMPLEMENTED: the password in its Basic header is
    checked, and the bearer token issued, by ``PasswordAuth`` as for any call."""

    def authenticate(self, outgoing, incoming):
        pass

    def is_valid(self, token):
        return b""  # every call was let through by PasswordAuth already

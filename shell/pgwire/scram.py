"""SCRAM-SHA-256 (RFC 5802, RFC 7677) as Postgres speaks it, server side.

1. The server offers the mechanism (AuthenticationSASL).
2. The client sends ``n,,n=,r=<client nonce>`` (SASLInitialResponse).
3. The server answers ``r=<client nonce><server nonce>,s=<salt>,i=<iterations>``.
4. The client sends ``c=<channel binding>,r=<nonce>,p=<proof>``; the server checks the
   proof against the stored key and answers ``v=<server signature>`` (AuthenticationSASLFinal).

The password is salted once, when the server starts (``Verifier``): a connection
costs two HMACs and a hash, not 4,096 rounds of PBKDF2. Channel binding
(SCRAM-SHA-256-PLUS) is not offered: the endpoint speaks no TLS.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096


class AuthenticationFailed(Exception):
    pass


class Verifier:
    """What the server keeps of a password: salt, iterations, stored key and server key."""

    def __init__(self, password: str, iterations: int = ITERATIONS):
        self.salt = os.urandom(16)
        self.iterations = iterations
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), self.salt, iterations)
        self.stored_key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
        self.server_key = _hmac(salted, b"Server Key")

    def exchange(self) -> "Exchange":
        return Exchange(self)


class Exchange:
    """One connection's conversation: ``first(client_first)`` -> server-first message,
    ``final(client_final)`` -> server-final message, or AuthenticationFailed."""

    def __init__(self, verifier: Verifier):
        self.verifier = verifier
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""

    def first(self, message: str) -> str:
        header, sep, bare = _split_gs2(message)
        if header[0] not in "ny":
            raise AuthenticationFailed("channel binding is not supported: connect with channel_binding=disable "
                                       "or prefer (the default)")
        attributes = _attributes(bare)
        client_nonce = attributes.get("r")
        if not client_nonce:
            raise AuthenticationFailed("SCRAM client-first-message without a nonce")
        self._gs2_header = header + sep
        self._client_first_bare = bare
        self._nonce = client_nonce + base64.b64encode(secrets.token_bytes(18)).decode()
        salt = base64.b64encode(self.verifier.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={self.verifier.iterations}"
        return self._server_first

    def final(self, message: str) -> str:
        without_proof, _, proof_part = message.rpartition(",p=")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce:
            raise AuthenticationFailed("SCRAM nonce mismatch")
        if attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise AuthenticationFailed("SCRAM channel binding mismatch")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise AuthenticationFailed("SCRAM proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.verifier.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("wrong password")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.verifier.stored_key):
            raise AuthenticationFailed("wrong password")
        server_signature = _hmac(self.verifier.server_key, auth_message)
        return "v=" + base64.b64encode(server_signature).decode()


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _split_gs2(message: str) -> tuple[str, str, str]:
    """``n,,n=user,r=nonce`` -> (``n,``, ``,``, ``n=user,r=nonce``)."""
    parts = message.split(",", 2)
    if len(parts) != 3 or not parts[0]:
        raise AuthenticationFailed("malformed SCRAM client-first-message")
    return parts[0] + "," + parts[1], ",", parts[2]


def _attributes(text: str) -> dict[str, str]:
    found = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep:
            found[key] = value
    return found

"""The Postgres protocol's messages (version 3.0), as bytes: reading the client's
with bounds checked, writing the server's.

A message is a type byte, an int32 length that counts itself, and a body; the
startup message has no type byte. ``MessageReader`` keeps its own buffer
over an asyncio stream, so that a server streaming a SUBSCRIBE can still
read (and keep) what the client sends meanwhile, and notice it hang up. A
length below 4 or above ``max_bytes`` is a ``ProtocolViolation``: the
server answers it with an error and closes that connection only.
"""
from __future__ import annotations

import asyncio
import struct

_INT32 = struct.Struct("!i")
_HEADER = struct.Struct("!ci")


class ProtocolViolation(Exception):
    pass


class MessageReader:
    def __init__(self, stream: asyncio.StreamReader, max_bytes: int):
        self._stream = stream
        self._buffer = bytearray()
        self.max_bytes = max_bytes
        self.closed = False
        self._pending: asyncio.Future | None = None

    def reading(self) -> asyncio.Future:
        """The read from the client in flight (started if none is): a SUBSCRIBE waits on it beside
        its changes; ``took()`` keeps what it read once it is done."""
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._stream.read(65536))
        return self._pending

    def took(self) -> bool:
        """Keep what the finished read got; False when the client has hung up."""
        data = self._pending.result()
        self._pending = None
        return self._keep(data)

    def _keep(self, data: bytes) -> bool:
        if not data:
            self.closed = True
            return False
        self._buffer += data
        if len(self._buffer) > self.max_bytes + 5:
            raise ProtocolViolation(f"the client sent more than {self.max_bytes} bytes without a message end")
        return True

    async def fill(self) -> bool:
        """Read what the client has sent into the buffer; False when it has hung up."""
        if self._pending is None:  # read here, without a task for it (one per query otherwise)
            return self._keep(await self._stream.read(65536))
        await self._pending
        return self.took()

    async def _take(self, count: int) -> bytes:
        while len(self._buffer) < count:
            if not await self.fill():
                raise ConnectionResetError("the client hung up")
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    async def startup(self) -> bytes:
        """The startup packet's body (after its length): the protocol code first."""
        length = _INT32.unpack(await self._take(4))[0]
        if length < 8 or length > 10_000:
            raise ProtocolViolation(f"invalid startup packet length {length}")
        return await self._take(length - 4)

    async def message(self) -> tuple[bytes, bytes]:
        """The next message's type byte and body."""
        kind, length = _HEADER.unpack(await self._take(5))
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length - 4 > self.max_bytes:
            raise ProtocolViolation(f"message of {length} bytes is over the limit of {self.max_bytes}")
        return kind, await self._take(length - 4)


class Body:
    """Fields read one after another from a message body, every read checked against its end."""

    def __init__(self, data: bytes):
        self.data = data
        self.at = 0

    def _need(self, count: int) -> None:
        if count < 0 or self.at + count > len(self.data):
            raise ProtocolViolation("message body shorter than its fields")

    def int16(self) -> int:
        self._need(2)
        value = struct.unpack_from("!h", self.data, self.at)[0]
        self.at += 2
        return value

    def int32(self) -> int:
        self._need(4)
        value = _INT32.unpack_from(self.data, self.at)[0]
        self.at += 4
        return value

    def uint32(self) -> int:
        return self.int32() & 0xFFFFFFFF

    def string(self) -> str:
        end = self.data.find(b"\x00", self.at)
        if end < 0:
            raise ProtocolViolation("string without its terminating zero byte")
        text = self.data[self.at:end]
        self.at = end + 1
        try:
            return text.decode()
        except UnicodeDecodeError:
            raise ProtocolViolation("string is not UTF-8") from None

    def raw(self, count: int) -> bytes:
        self._need(count)
        value = self.data[self.at:self.at + count]
        self.at += count
        return value

    def byte(self) -> bytes:
        return self.raw(1)

    def count(self, what: str) -> int:
        value = self.int16()
        if value < 0:
            raise ProtocolViolation(f"negative count of {what}")
        return value


# -- the server's messages ---------------------------------------------------------------
def message(kind: bytes, body: bytes = b"") -> bytes:
    return _HEADER.pack(kind, len(body) + 4) + body


def cstring(text: str) -> bytes:
    return text.encode() + b"\x00"


def authentication(code: int, data: bytes = b"") -> bytes:
    return message(b"R", _INT32.pack(code) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstring(name) + cstring(value))


def backend_key_data(process_id: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!iI", process_id, secret))


def ready_for_query(status: bytes) -> bytes:
    return message(b"Z", status)


def row_description(fields: list[tuple[str, int, int, int, int]]) -> bytes:
    """Fields as (name, type OID, type size, type modifier, format code)."""
    parts = [struct.pack("!h", len(fields))]
    for name, oid, size, modifier, fmt in fields:
        parts.append(cstring(name) + struct.pack("!ihihih", 0, 0, oid, size, modifier, fmt))
    return message(b"T", b"".join(parts))


def parameter_description(oids: list[int]) -> bytes:
    return message(b"t", struct.pack(f"!h{len(oids)}I", len(oids), *oids))


def data_row(values: list[bytes | None]) -> bytes:
    parts = [struct.pack("!h", len(values))]
    for value in values:
        parts.append(b"\xff\xff\xff\xff" if value is None else _INT32.pack(len(value)) + value)
    body = b"".join(parts)
    return _HEADER.pack(b"D", len(body) + 4) + body


def command_complete(tag: str) -> bytes:
    return message(b"C", cstring(tag))


def _fields(severity: str, code: str, text: str, hint: str | None) -> bytes:
    body = b"S" + cstring(severity) + b"V" + cstring(severity) + b"C" + cstring(code) + b"M" + cstring(text)
    if hint:
        body += b"H" + cstring(hint)
    return body + b"\x00"


def error_response(code: str, text: str, hint: str | None = None, severity: str = "ERROR") -> bytes:
    return message(b"E", _fields(severity, code, text, hint))


def notice_response(text: str) -> bytes:
    return message(b"N", _fields("NOTICE", "00000", text, None))


PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
PORTAL_SUSPENDED = message(b"s")
EMPTY_QUERY = message(b"I")
COPY_DONE = message(b"c")


def copy_out_response(columns: int) -> bytes:
    return message(b"H", struct.pack(f"!bh{columns}h", 0, columns, *([0] * columns)))


def copy_data(data: bytes) -> bytes:
    return message(b"d", data)

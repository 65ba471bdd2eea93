"""Flight SQL's messages on the wire: the dozen protobuf messages weir reads and writes.

Flight SQL rides on Arrow Flight: a command is a protobuf message packed in a
``google.protobuf.Any`` (a type URL and the message's bytes) and carried in a
FlightDescriptor's ``cmd``, a Ticket, an Action's body or a Result. The
messages (``format/FlightSql.proto`` in apache/arrow) hold only strings,
bytes, booleans and unsigned integers, so they are read and written here with
protobuf's wire format directly instead of the ``protobuf`` package and code
generated from the .proto: each message is a class that lists its fields
(number, name, kind), and one reader and one writer serve them all.

The wire format, as far as these messages use it: a message is a sequence of
fields, each a key (``number << 3 | wire_type``, a varint) then its value:
wire type 0 a varint (bool, uint32, int64), 2 a length (varint) then that
many bytes (string, bytes, a packed repeated uint32). Fields of a number this
class does not list are skipped, as protobuf does (wire types 1 and 5 too).
Bad bytes raise ``ProtocolError`` naming what is wrong; nothing is trusted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

TYPE_URL_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."

STRING, BYTES, BOOL, UINT, REPEATED_STRING, REPEATED_UINT = (
    "string", "bytes", "bool", "uint", "repeated string", "repeated uint")


class ProtocolError(ValueError):
    """Bytes that are not the Flight SQL message they should be."""


# -- the wire format ---------------------------------------------------------------------
def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # protobuf writes a negative int64 as its 64-bit two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtocolError("the message ends inside a number")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ProtocolError("a number of more than 10 bytes")


def read_fields(data: bytes) -> list[tuple[int, int, int | bytes]]:
    """(number, wire type, value) of each field, in order."""
    found = []
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtocolError("a field numbered 0")
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            if pos + size > len(data):
                raise ProtocolError(f"field {number} is {size} bytes long but the message ends sooner")
            value, pos = bytes(data[pos:pos + size]), pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                raise ProtocolError(f"field {number} ends past the message")
            value, pos = bytes(data[pos:pos + width]), pos + width
        else:
            raise ProtocolError(f"field {number} has wire type {wire}, which Flight SQL's messages never use")
        found.append((number, wire, value))
    return found


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _length_delimited(number: int, value: bytes) -> bytes:
    return _key(number, 2) + _varint(len(value)) + value


# -- messages ---------------------------------------------------------------------------
@dataclass
class Message:
    #: (field number, attribute, kind) of each field this class reads and writes.
    FIELDS: ClassVar[tuple[tuple[int, str, str], ...]] = ()

    @classmethod
    def name(cls) -> str:
        return cls.__name__

    def encode(self) -> bytes:
        out = bytearray()
        for number, attribute, kind in self.FIELDS:
            value = getattr(self, attribute)
            if value is None:
                continue
            if kind == STRING:
                out += _length_delimited(number, value.encode("utf-8"))
            elif kind == BYTES:
                out += _length_delimited(number, bytes(value))
            elif kind in (BOOL, UINT):
                if value:
                    out += _key(number, 0) + _varint(int(value))
            elif kind == REPEATED_STRING:
                for item in value:
                    out += _length_delimited(number, item.encode("utf-8"))
            elif kind == REPEATED_UINT:
                if value:
                    out += _length_delimited(number, b"".join(_varint(v) for v in value))
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes):
        by_number = {number: (attribute, kind) for number, attribute, kind in cls.FIELDS}
        values: dict[str, object] = {}
        for number, wire, value in read_fields(data):
            if number not in by_number:
                continue  # a field of a newer version of the message: skipped, as protobuf does
            attribute, kind = by_number[number]
            expected = 0 if kind in (BOOL, UINT) else 2
            if kind == REPEATED_UINT and wire == 0:
                expected = 0  # unpacked, as proto2 writers send it
            if wire != expected:
                raise ProtocolError(f"{cls.name()}.{attribute} has wire type {wire}, not {expected}")
            if kind in (STRING, REPEATED_STRING):
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    raise ProtocolError(f"{cls.name()}.{attribute} is not UTF-8 text") from None
            if kind == BOOL:
                value = bool(value)
            if kind == REPEATED_STRING:
                values.setdefault(attribute, []).append(value)
            elif kind == REPEATED_UINT:
                items = values.setdefault(attribute, [])
                if wire == 0:
                    items.append(value)
                else:
                    pos = 0
                    while pos < len(value):
                        item, pos = _read_varint(value, pos)
                        items.append(item)
            else:
                values[attribute] = value
        return cls(**values)

    def pack(self) -> bytes:
        """This message in a ``google.protobuf.Any``, as Flight SQL carries every command."""
        type_url = (TYPE_URL_PREFIX + self.name()).encode("ascii")
        return _length_delimited(1, type_url) + _length_delimited(2, self.encode())


@dataclass
class CommandStatementQuery(Message):
    query: str = ""
    transaction_id: bytes | None = None
    FIELDS = ((1, "query", STRING), (2, "transaction_id", BYTES))


@dataclass
class CommandStatementUpdate(Message):
    query: str = ""
    transaction_id: bytes | None = None
    FIELDS = ((1, "query", STRING), (2, "transaction_id", BYTES))


@dataclass
class CommandStatementSubstraitPlan(Message):
    FIELDS = ()


@dataclass
class CommandStatementIngest(Message):
    FIELDS = ()


@dataclass
class TicketStatementQuery(Message):
    statement_handle: bytes = b""
    FIELDS = ((1, "statement_handle", BYTES),)


@dataclass
class CommandPreparedStatementQuery(Message):
    prepared_statement_handle: bytes = b""
    FIELDS = ((1, "prepared_statement_handle", BYTES),)


@dataclass
class CommandPreparedStatementUpdate(Message):
    prepared_statement_handle: bytes = b""
    FIELDS = ((1, "prepared_statement_handle", BYTES),)


@dataclass
class ActionCreatePreparedStatementRequest(Message):
    query: str = ""
    transaction_id: bytes | None = None
    FIELDS = ((1, "query", STRING), (2, "transaction_id", BYTES))


@dataclass
class ActionCreatePreparedStatementResult(Message):
    prepared_statement_handle: bytes = b""
    dataset_schema: bytes | None = None
    parameter_schema: bytes | None = None
    FIELDS = ((1, "prepared_statement_handle", BYTES), (2, "dataset_schema", BYTES),
              (3, "parameter_schema", BYTES))


@dataclass
class ActionClosePreparedStatementRequest(Message):
    prepared_statement_handle: bytes = b""
    FIELDS = ((1, "prepared_statement_handle", BYTES),)


@dataclass
class CommandGetCatalogs(Message):
    FIELDS = ()


@dataclass
class CommandGetDbSchemas(Message):
    catalog: str | None = None
    db_schema_filter_pattern: str | None = None
    FIELDS = ((1, "catalog", STRING), (2, "db_schema_filter_pattern", STRING))


@dataclass
class CommandGetTables(Message):
    catalog: str | None = None
    db_schema_filter_pattern: str | None = None
    table_name_filter_pattern: str | None = None
    table_types: list[str] = field(default_factory=list)
    include_schema: bool = False
    FIELDS = ((1, "catalog", STRING), (2, "db_schema_filter_pattern", STRING),
              (3, "table_name_filter_pattern", STRING), (4, "table_types", REPEATED_STRING),
              (5, "include_schema", BOOL))


@dataclass
class CommandGetTableTypes(Message):
    FIELDS = ()


@dataclass
class CommandGetSqlInfo(Message):
    info: list[int] = field(default_factory=list)
    FIELDS = ((1, "info", REPEATED_UINT),)


#: Every message an Any may carry to this server, by its protobuf name.
KNOWN: dict[str, type[Message]] = {cls.name(): cls for cls in (
    CommandStatementQuery, CommandStatementUpdate, CommandStatementSubstraitPlan, CommandStatementIngest,
    TicketStatementQuery, CommandPreparedStatementQuery, CommandPreparedStatementUpdate,
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult,
    ActionClosePreparedStatementRequest, CommandGetCatalogs, CommandGetDbSchemas, CommandGetTables,
    CommandGetTableTypes, CommandGetSqlInfo)}


def unpack(data: bytes) -> Message:
    """The message in a ``google.protobuf.Any``; ``ProtocolError`` for anything else, or for a
    Flight SQL message this server does not answer (named, so the client's error says which)."""
    type_url = value = None
    for number, wire, item in read_fields(bytes(data)):
        if number == 1 and wire == 2:
            type_url = item
        elif number == 2 and wire == 2:
            value = item
    if type_url is None:
        raise ProtocolError("not a Flight SQL command (a protobuf Any with a type URL)")
    try:
        url = type_url.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolError("the command's type URL is not UTF-8 text") from None
    name = url.rpartition("/")[2]
    package, _, short = name.rpartition(".")
    if package != "arrow.flight.protocol.sql":
        raise ProtocolError(f"not a Flight SQL command: {url[:200]!r}")
    if short not in KNOWN:
        raise ProtocolError(f"{short[:100]} is not answered by weir's Flight SQL endpoint (read-only queries "
                            "and the catalog)")
    return KNOWN[short].decode(value or b"")

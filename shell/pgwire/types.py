"""Postgres types for DuckDB's: the type OID a column is described with, and the
text and binary form of each value (the wire protocol's two formats).

A column is known by DuckDB's name of its type (``cursor.description``:
``BIGINT``, ``DECIMAL(10,2)``, ``TIMESTAMP WITH TIME ZONE``, ``INTEGER[]``).
``column_type(name)`` gives the ``PgType``: its OID, the type modifier
RowDescription carries (a DECIMAL's precision and scale), and two encoders
from a Python value (what DuckDB's ``fetchmany`` returns) to bytes. A type
without a binary form (INTERVAL's months, lists, structs) is sent as text
even when binary is asked for: RowDescription says so per column, and
clients (psycopg, JDBC) read each column by the format it names.
"""
from __future__ import annotations

import datetime
import json
import math
import struct
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

import numpy as np
import pyarrow as pa

BOOL, BYTEA, INT8, INT2, INT4, TEXT, OID, JSON, FLOAT4, FLOAT8 = 16, 17, 20, 21, 23, 25, 26, 114, 700, 701
VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, UUID = 1043, 1082, 1083, 1114, 1184, 1186, 1700, 2950
ARRAY_OF = {BOOL: 1000, INT2: 1005, INT4: 1007, TEXT: 1009, INT8: 1016, FLOAT4: 1021, FLOAT8: 1022,
            DATE: 1182, TIMESTAMP: 1115, NUMERIC: 1231}

_EPOCH_2000 = datetime.datetime(2000, 1, 1)
_EPOCH_2000_UTC = _EPOCH_2000.replace(tzinfo=datetime.timezone.utc)
_DATE_2000 = datetime.date(2000, 1, 1).toordinal()


@dataclass(frozen=True)
class PgType:
    oid: int
    size: int  # RowDescription's typlen: bytes of a fixed-width type, -1 for a varying one
    text: Callable[[Any], str]
    binary: Callable[[Any], bytes] | None  # None: sent as text even in a binary result
    modifier: int = -1


# -- text ------------------------------------------------------------------------
def _bool_text(v: bool) -> str:
    return "t" if v else "f"


def _float_text(v: float) -> str:
    if math.isfinite(v):
        return repr(v)
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def _float4_text(v: float) -> str:
    return _float_text(v) if not math.isfinite(v) else str(np.float32(v))


def _decimal_text(v: Decimal) -> str:
    return format(v, "f") if isinstance(v, Decimal) else str(v)


def _timestamp_text(v: datetime.datetime) -> str:
    """As Postgres prints it: no trailing zeros in the fraction, the offset as +HH or +HH:MM."""
    text = v.replace(tzinfo=None).isoformat(sep=" ")
    if v.microsecond:
        text = text.rstrip("0")
    offset = v.utcoffset()
    if offset is None:
        return text
    minutes = int(offset.total_seconds()) // 60
    sign, minutes = ("-", -minutes) if minutes < 0 else ("+", minutes)
    return f"{text}{sign}{minutes // 60:02d}" + (f":{minutes % 60:02d}" if minutes % 60 else "")


def _interval_text(v: datetime.timedelta) -> str:
    hours, rest = divmod(v.seconds, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}" + (f".{v.microseconds:06d}" if v.microseconds else "")
    return f"{v.days} days {clock}" if v.days else clock


def _bytea_text(v: bytes) -> str:
    return "\\x" + bytes(v).hex()


def _array_text(v: list) -> str:
    return "{" + ",".join("NULL" if x is None else _array_item(x) for x in v) + "}"


def _array_item(x: Any) -> str:
    if isinstance(x, bool):
        return _bool_text(x)
    if isinstance(x, (int, float, Decimal)):
        return _float_text(x) if isinstance(x, float) else str(x)
    text = _any_text(x)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _any_text(v: Any) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, default=str)
    if isinstance(v, datetime.datetime):
        return _timestamp_text(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return _bytea_text(v)
    if isinstance(v, bool):
        return _bool_text(v)
    return str(v)


# -- binary ------------------------------------------------------------------------
_int2, _int4, _int8 = struct.Struct("!h").pack, struct.Struct("!i").pack, struct.Struct("!q").pack
_float4, _float8 = struct.Struct("!f").pack, struct.Struct("!d").pack


def _bool_binary(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def _micros(delta: datetime.timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _timestamp_binary(v: datetime.datetime) -> bytes:
    return _int8(_micros(v - _EPOCH_2000))


def _timestamptz_binary(v: datetime.datetime) -> bytes:
    return _int8(_micros(v - _EPOCH_2000_UTC) if v.tzinfo else _micros(v - _EPOCH_2000))


def _date_binary(v: datetime.date) -> bytes:
    return _int4(v.toordinal() - _DATE_2000)


def _time_binary(v: datetime.time) -> bytes:
    return _int8(((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond)


def _interval_binary(v: datetime.timedelta) -> bytes:
    return struct.pack("!qii", v.seconds * 1_000_000 + v.microseconds, v.days, 0)


def numeric_binary(v: Decimal | int) -> bytes:
    """Postgres's binary NUMERIC: base-10000 digits with a weight, a sign and a display scale."""
    v = Decimal(v)
    if v.is_nan():
        return struct.pack("!hhHh", 0, 0, 0xC000, 0)
    if v.is_infinite():
        return struct.pack("!hhHh", 0, 0, 0xF000 if v < 0 else 0xD000, 0)
    sign, digits, exponent = v.as_tuple()
    text = "".join(map(str, digits))
    if exponent > 0:
        text, exponent = text + "0" * exponent, 0
    scale = -exponent
    whole, fraction = (text[:len(text) - scale], text[len(text) - scale:]) if scale else (text, "")
    fraction = fraction.rjust(scale, "0")
    whole = whole.lstrip("0")
    whole = whole.rjust(-(-len(whole) // 4) * 4, "0")
    fraction = fraction.ljust(-(-len(fraction) // 4) * 4, "0")
    groups = [int(whole[i:i + 4]) for i in range(0, len(whole), 4)] + \
             [int(fraction[i:i + 4]) for i in range(0, len(fraction), 4)]
    weight = len(whole) // 4 - 1
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack(f"!hhHh{len(groups)}H", len(groups), weight, 0x4000 if sign else 0, scale, *groups)


def _text_binary(v: Any) -> bytes:
    return _any_text(v).encode()


# -- DuckDB's type names ---------------------------------------------------------------
_TYPES = {
    "BOOLEAN": PgType(BOOL, 1, _bool_text, _bool_binary),
    "TINYINT": PgType(INT2, 2, str, _int2),
    "SMALLINT": PgType(INT2, 2, str, _int2),
    "UTINYINT": PgType(INT2, 2, str, _int2),
    "INTEGER": PgType(INT4, 4, str, _int4),
    "USMALLINT": PgType(INT4, 4, str, _int4),
    "BIGINT": PgType(INT8, 8, str, _int8),
    "UINTEGER": PgType(INT8, 8, str, _int8),
    "UBIGINT": PgType(NUMERIC, -1, str, numeric_binary),
    "HUGEINT": PgType(NUMERIC, -1, str, numeric_binary),
    "UHUGEINT": PgType(NUMERIC, -1, str, numeric_binary),
    "FLOAT": PgType(FLOAT4, 4, _float4_text, _float4),
    "DOUBLE": PgType(FLOAT8, 8, _float_text, _float8),
    "VARCHAR": PgType(TEXT, -1, str, str.encode),
    "BLOB": PgType(BYTEA, -1, _bytea_text, bytes),
    "DATE": PgType(DATE, 4, datetime.date.isoformat, _date_binary),
    "TIME": PgType(TIME, 8, datetime.time.isoformat, _time_binary),
    "TIMESTAMP": PgType(TIMESTAMP, 8, _timestamp_text, _timestamp_binary),
    "TIMESTAMP_S": PgType(TIMESTAMP, 8, _timestamp_text, _timestamp_binary),
    "TIMESTAMP_MS": PgType(TIMESTAMP, 8, _timestamp_text, _timestamp_binary),
    "TIMESTAMP_NS": PgType(TIMESTAMP, 8, _timestamp_text, _timestamp_binary),
    "TIMESTAMP WITH TIME ZONE": PgType(TIMESTAMPTZ, 8, _timestamp_text, _timestamptz_binary),
    "INTERVAL": PgType(INTERVAL, 16, _interval_text, None),
    "UUID": PgType(UUID, 16, str, lambda v: uuid.UUID(str(v)).bytes),
    "JSON": PgType(JSON, -1, str, None),
}
_OTHER = PgType(TEXT, -1, _any_text, _text_binary)


def column_type(duckdb_type: str) -> PgType:
    """The Postgres type of a column of DuckDB's type ``duckdb_type`` (its name as DuckDB spells it)."""
    name = str(duckdb_type).upper()
    found = _TYPES.get(name)
    if found is not None:
        return found
    if name.startswith("DECIMAL"):
        precision, _, scale = name[name.find("(") + 1:-1].partition(",")
        modifier = ((int(precision) << 16) | int(scale or 0)) + 4 if precision.strip().isdigit() else -1
        return PgType(NUMERIC, -1, _decimal_text, numeric_binary, modifier)
    if name.endswith("[]") and name[:-2] in _TYPES and _TYPES[name[:-2]].oid in ARRAY_OF:
        return PgType(ARRAY_OF[_TYPES[name[:-2]].oid], -1, _array_text, None)
    return _OTHER


def arrow_type_name(t: pa.DataType) -> str:
    """DuckDB's name of the type of an Arrow column (the answers of weir's session: SHOW JOBS ...)."""
    checks = ((pa.types.is_boolean, "BOOLEAN"), (pa.types.is_int8, "TINYINT"), (pa.types.is_int16, "SMALLINT"),
              (pa.types.is_int32, "INTEGER"), (pa.types.is_int64, "BIGINT"), (pa.types.is_float32, "FLOAT"),
              (pa.types.is_float64, "DOUBLE"), (pa.types.is_date, "DATE"), (pa.types.is_decimal, "DECIMAL"),
              (pa.types.is_binary, "BLOB"))
    for check, name in checks:
        if check(t):
            return f"DECIMAL({t.precision},{t.scale})" if name == "DECIMAL" else name
    if pa.types.is_timestamp(t):
        return "TIMESTAMP WITH TIME ZONE" if t.tz else "TIMESTAMP"
    return "VARCHAR"


# -- parameters (Bind) -------------------------------------------------------------------
def _text_bool(text: str) -> bool:
    return text.strip().lower() in ("t", "true", "1", "on", "y", "yes")


def _bytea_from_text(text: str) -> bytes:
    return bytes.fromhex(text[2:]) if text.startswith("\\x") else text.encode()


_PARAM_TEXT: dict[int, Callable[[str], Any]] = {
    BOOL: _text_bool, INT2: int, INT4: int, INT8: int, OID: int, FLOAT4: float, FLOAT8: float,
    NUMERIC: Decimal, DATE: datetime.date.fromisoformat, TIMESTAMP: datetime.datetime.fromisoformat,
    TIMESTAMPTZ: datetime.datetime.fromisoformat, BYTEA: _bytea_from_text,
}


def _numeric_from_binary(data: bytes) -> Decimal:
    count, weight, sign, scale = struct.unpack_from("!hhHh", data)
    if sign == 0xC000:
        return Decimal("NaN")
    groups = struct.unpack_from(f"!{count}H", data, 8)
    value = sum(Decimal(g) * (Decimal(10000) ** (weight - i)) for i, g in enumerate(groups))
    value = value.quantize(Decimal(1).scaleb(-scale)) if scale else value
    return -value if sign == 0x4000 else value


_PARAM_BINARY: dict[int, Callable[[bytes], Any]] = {
    BOOL: lambda b: b != b"\x00", INT2: lambda b: struct.unpack("!h", b)[0],
    INT4: lambda b: struct.unpack("!i", b)[0], INT8: lambda b: struct.unpack("!q", b)[0],
    OID: lambda b: struct.unpack("!I", b)[0],
    FLOAT4: lambda b: struct.unpack("!f", b)[0], FLOAT8: lambda b: struct.unpack("!d", b)[0],
    TEXT: bytes.decode, VARCHAR: bytes.decode, 0: bytes.decode, BYTEA: bytes,
    NUMERIC: _numeric_from_binary,
    DATE: lambda b: datetime.date.fromordinal(struct.unpack("!i", b)[0] + _DATE_2000),
    TIMESTAMP: lambda b: _EPOCH_2000 + datetime.timedelta(microseconds=struct.unpack("!q", b)[0]),
    TIMESTAMPTZ: lambda b: _EPOCH_2000_UTC + datetime.timedelta(microseconds=struct.unpack("!q", b)[0]),
}


def decode_parameter(data: bytes, oid: int, binary: bool) -> Any:
    """A Bind parameter's value for DuckDB, from its bytes, its declared type and format."""
    if binary:
        decode = _PARAM_BINARY.get(oid)
        if decode is None:
            raise ValueError(f"a binary parameter of type OID {oid} is not supported: send it as text")
        return decode(data)
    text = data.decode()
    decode = _PARAM_TEXT.get(oid)
    return decode(text) if decode is not None else text

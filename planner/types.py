"""SQL types as written in DDL ↔ Arrow types inside the engine.

Every timestamp is ``timestamp[us]`` in the engine, whatever its declared
precision; a declared precision below 6 travels in the field's metadata
(``column_field``) and sources truncate TIMESTAMP(3) values to milliseconds.
"""
from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from weir.engine.connectors.timestamps import PRECISION

_T = exp.DataType.Type

_SIMPLE = {
    _T.TINYINT: pa.int8(),
    _T.SMALLINT: pa.int16(),
    _T.INT: pa.int32(),
    _T.BIGINT: pa.int64(),
    _T.FLOAT: pa.float32(),
    _T.DOUBLE: pa.float64(),
    _T.BOOLEAN: pa.bool_(),
    _T.VARCHAR: pa.string(),
    _T.CHAR: pa.string(),
    _T.TEXT: pa.string(),
    _T.NVARCHAR: pa.string(),
    _T.DATE: pa.date32(),
    _T.TIMESTAMP: pa.timestamp("us"),
    _T.DATETIME: pa.timestamp("us"),
    _T.TIMESTAMP_MS: pa.timestamp("us"),
    _T.TIMESTAMPLTZ: pa.timestamp("us"),
    _T.TIMESTAMPTZ: pa.timestamp("us"),
    _T.TIME: pa.time64("us"),
    _T.BINARY: pa.binary(),
    _T.VARBINARY: pa.binary(),
}


class UnsupportedType(ValueError):
    pass


def arrow_type(data_type: exp.DataType) -> pa.DataType:
    """The engine's Arrow type for a declared column type."""
    kind = data_type.this
    if kind == _T.DECIMAL:
        params = [int(p.this.this) for p in data_type.expressions] or [10, 0]
        precision, scale = (params + [0])[:2]
        return pa.decimal128(precision, scale)
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    raise UnsupportedType(data_type.sql())


def column_field(name: str, data_type: exp.DataType, nullable: bool = True) -> pa.Field:
    """A declared column as an Arrow field. A timestamp declared with fewer than 6 fractional
    digits (TIMESTAMP(3)) carries its precision in the field's metadata
    (``engine.connectors.timestamps.PRECISION``): sources truncate values to it as they read them."""
    field = pa.field(name, arrow_type(data_type), nullable=nullable)
    precision = _timestamp_precision(data_type)
    if precision is not None and precision < 6:
        field = field.with_metadata({PRECISION: str(precision)})
    return field


def _timestamp_precision(data_type: exp.DataType) -> int | None:
    if data_type.this == _T.TIMESTAMP_MS:
        return 3
    if data_type.this not in (_T.TIMESTAMP, _T.DATETIME, _T.TIMESTAMPLTZ, _T.TIMESTAMPTZ) or not data_type.expressions:
        return None  # TIMESTAMP without a precision is TIMESTAMP(6), as in Flink
    return int(data_type.expressions[0].this.this)


def sql_name(t: pa.DataType) -> str:
    """A Flink-style SQL name for an Arrow type, for EXPLAIN and messages."""
    if pa.types.is_timestamp(t):
        return "TIMESTAMP(3)"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    names = {
        pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT",
        pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN",
        pa.string(): "VARCHAR", pa.large_string(): "VARCHAR", pa.date32(): "DATE",
        pa.binary(): "BYTES", pa.time64("us"): "TIME",
    }
    return names.get(t, str(t).upper())


def normalise(t: pa.DataType) -> pa.DataType:
    """The engine's representation of a type DuckDB produced."""
    if pa.types.is_timestamp(t):
        return pa.timestamp("us")
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_decimal(t) and t.precision == 38 and t.scale == 0:
        return pa.int64()  # a HUGEINT: SUM over integers, BIGINT as in Flink
    return t


_INTEGER_RANK = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 3, pa.int64(): 4}


def assignable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether a query column of type ``source`` may be written to ``target``
    without an explicit CAST: equal types, or a widening conversion."""
    if source == target or pa.types.is_null(source):
        return True
    if source in _INTEGER_RANK:
        if target in _INTEGER_RANK:
            return _INTEGER_RANK[source] <= _INTEGER_RANK[target]
        return pa.types.is_floating(target) or pa.types.is_decimal(target)
    if pa.types.is_floating(source):
        return pa.types.is_floating(target) and source.bit_width <= target.bit_width
    if pa.types.is_decimal(source):
        return pa.types.is_decimal(target) or pa.types.is_floating(target)
    if pa.types.is_timestamp(source):
        return pa.types.is_timestamp(target)
    if pa.types.is_string(source):
        return pa.types.is_string(target)
    return False

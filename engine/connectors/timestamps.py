"""Timestamps enter at their declared precision.

Every timestamp is ``timestamp[us]`` inside the engine. A column declared with
fewer fractional digits (``TIMESTAMP(3)``) says so in its Arrow field's
metadata (``PRECISION``, set by the planner); a source truncates its values to
that precision as it reads them, as Flink stores a TIMESTAMP(3) value, so that
``CAST(ts AS STRING)`` and ``MAX(ts)`` never show digits the type does not have.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

#: The field metadata key holding a timestamp column's declared fractional digits (0..5).
PRECISION = "weir.precision"


def declared_precision(field: pa.Field) -> int | None:
    """The fractional digits ``field`` was declared with, when fewer than the engine's 6."""
    if not pa.types.is_timestamp(field.type) or not field.metadata:
        return None
    value = field.metadata.get(PRECISION.encode())
    return int(value) if value is not None else None


def truncate(column: pa.Array | pa.ChunkedArray, precision: int) -> pa.Array | pa.ChunkedArray:
    """Timestamps cut to ``precision`` fractional digits (towards the past, as Flink's
    TIMESTAMP(p) drops the digits past p)."""
    if precision >= 6:
        return column
    if precision >= 3:
        return pc.floor_temporal(column, multiple=10 ** (6 - precision), unit="microsecond")
    return pc.floor_temporal(column, multiple=10 ** (3 - precision), unit="millisecond")

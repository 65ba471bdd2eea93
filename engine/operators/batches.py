"""Shaping operator output: every batch an operator returns has exactly its output schema."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.watermarks import ARRIVAL_FIELD, ARRIVAL_WATERMARK

#: 0, 1, 2, ...: grown by doubling, so that no batch builds its positions in a Python loop.
_POSITIONS = pa.nulls(0, pa.int64())  # (no pa.array of Python values at import: engine/pandas_import.py)


def positions(count: int, start: int = 0) -> pa.Array:
    """``start, start + 1, ..., start + count - 1`` as int64 (row positions, row ids)."""
    global _POSITIONS
    cached = _POSITIONS
    if len(cached) < count:
        cached = _POSITIONS = pa.array(range(max(count, 2 * len(cached))), pa.int64())
    head = cached.slice(0, count)
    return pc.add(head, pa.scalar(start, pa.int64())) if start else head


def conform(table: pa.Table, schema: pa.Schema, operator_id: str) -> list[pa.RecordBatch]:
    """Rename ``table``'s columns positionally to ``schema``'s names, cast, and split into batches.

    An empty table yields no batch at all. A last column ``ARRIVAL_WATERMARK`` beyond the
    schema's (the rows' arrival watermarks, which a calc passes on) is kept as it is.
    """
    if table.num_rows == 0:
        return []
    if table.num_columns == len(schema) + 1 and table.column_names[-1] == ARRIVAL_WATERMARK:
        schema = schema.append(ARRIVAL_FIELD)
    if table.num_columns != len(schema):
        raise EngineError(
            f"operator produced {table.num_columns} columns, its output schema has {len(schema)}",
            hint=f"output schema: {schema.names}; produced: {table.column_names}",
            operator_id=operator_id,
        )
    try:
        table = table.rename_columns(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise EngineError(
            f"cannot cast the operator's result to its output schema: {exc}",
            hint=f"produced {table.schema}, expected {schema}",
            operator_id=operator_id,
        ) from exc
    return [b for b in table.to_batches() if b.num_rows > 0]

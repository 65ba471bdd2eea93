"""Shaping operator output: every batch an operator returns has exactly its output schema."""
from __future__ import annotations

import pyarrow as pa

from engine.errors import EngineError


def conform(table: pa.Table, schema: pa.Schema, operator_id: str) -> list[pa.RecordBatch]:
    """Rename ``table``'s columns positionally to ``schema``'s names, cast, and split into batches.

    An empty table yields no batch at all.
    """
    if table.num_rows == 0:
        return []
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

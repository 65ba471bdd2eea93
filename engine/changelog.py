"""Updating streams: every row of a changelog batch says what kind of change it is.

An append-only stream's batches are plain rows (every row an insert). An
updating stream's batches end with the column ``_row_kind`` (int8), holding
Flink's RowKind byte values, so that a changelog is an ordinary Arrow batch
and every vectorised path (DuckDB SQL, pyarrow compute, the exchange, the
checkpoint files) carries it unchanged.
"""
from __future__ import annotations

import pyarrow as pa

ROW_KIND = "_row_kind"
ROW_KIND_TYPE = pa.int8()

INSERT = 0          # +I
UPDATE_BEFORE = 1   # -U
UPDATE_AFTER = 2    # +U
DELETE = 3          # -D

#: How each kind is shown: print sink, the shell's changelog mode, EXPLAIN.
SHORT_NAMES = {INSERT: "+I", UPDATE_BEFORE: "-U", UPDATE_AFTER: "+U", DELETE: "-D"}

#: The changelog modes of a stream, as EXPLAIN shows them (Flink's changelogMode).
APPEND = "append"      # +I only
RETRACT = "retract"    # +I, -U, +U, -D: an update retracts the old row first
UPSERT = "upsert"      # +I, +U, -D by a unique key: an update replaces the row with its key


def is_changelog(schema: pa.Schema) -> bool:
    """Whether batches of ``schema`` carry a row kind."""
    return ROW_KIND in schema.names

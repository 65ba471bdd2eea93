"""Rendering batches as text: timestamps as '2024-01-01 00:00:10[.500]', rows as '+I[...]'.

Used by the file and print sinks; all of it vectorised with pyarrow compute.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, SHORT_NAMES, UPDATE_BEFORE
from weir.engine.operators.duckdb_sql import quote_ident
from weir.engine.pandas_import import scalar


def timestamp_text(column: pa.Array, separator: str = " ") -> pa.Array:
    """'2024-01-01 00:00:10', '2024-01-01 00:00:01.500' or '...01.000001': no
    fraction when it is zero, milliseconds when they suffice, else microseconds."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type.unit != "us" or column.type.tz is not None:
        column = pc.cast(column, pa.timestamp("us"), safe=False)
    # A cast renders every value as 'YYYY-MM-DD HH:MM:SS.ffffff': cut it to length
    # (strftime is more than ten times slower).
    text = pc.cast(column, pa.string())
    whole = pc.utf8_slice_codeunits(text, 0, 19)
    millis = pc.utf8_slice_codeunits(text, 0, 23)
    text = pc.if_else(pc.ends_with(text, ".000000"), whole, pc.if_else(pc.ends_with(text, "000"), millis, text))
    if separator != " ":
        text = pc.replace_substring(text, " ", separator, max_replacements=1)
    return text


def timestamps_as_text(batch: pa.RecordBatch, separator: str = " ") -> pa.RecordBatch:
    """``batch`` with every timestamp column rendered by ``timestamp_text``."""
    if not any(pa.types.is_timestamp(f.type) for f in batch.schema):
        return batch
    columns = [
        timestamp_text(column, separator) if pa.types.is_timestamp(column.type) else column
        for column in batch.columns
    ]
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def float_text(column: pa.Array) -> pa.Array:
    """Doubles as Java prints them, as Flink's print sink does: '200.0', '3.5', '1.0E20', 'NaN'."""
    text = pc.cast(column, pa.string())
    text = pc.replace_substring_regex(text, r"^(-?\d+)$", r"\1.0")
    text = pc.replace_substring_regex(text, r"^(-?\d)e\+?(-?)0*(\d+)$", r"\1.0E\2\3")
    text = pc.replace_substring_regex(text, r"^(-?\d\.\d+)e\+?(-?)0*(\d+)$", r"\1E\2\3")
    text = pc.replace_substring_regex(text, r"^(-?)inf$", r"\1Infinity")
    return pc.replace_substring_regex(text, r"^nan$", "NaN")


def changelog_lines(batch: pa.RecordBatch, row_kind: str = "+I") -> pa.Array:
    """One 'kind[v1, v2, ...]' string per row, as Flink's print sink writes them.
    Nulls print as 'null'. A changelog batch (one with ``_row_kind``) shows each
    row's own kind: +I, -U, +U or -D."""
    kinds: pa.Array | str = f"{row_kind}["
    index = batch.schema.get_field_index(ROW_KIND)
    if index >= 0:
        names = pa.array([SHORT_NAMES[k] + "[" for k in sorted(SHORT_NAMES)], pa.string())
        kinds = pc.take(names, pc.cast(batch.column(index), pa.int32()))
        batch = batch.remove_column(index)
    batch = timestamps_as_text(batch)
    parts = []
    for column in batch.columns:
        if pa.types.is_boolean(column.type):
            text = pc.if_else(column, scalar("true"), scalar("false"))
        elif pa.types.is_floating(column.type):
            text = float_text(column)
        else:
            try:
                text = pc.cast(column, pa.string())
            except pa.ArrowNotImplementedError:  # lists, structs, maps: rare in a print sink
                text = pa.array([None if v is None else str(v) for v in column.to_pylist()], pa.string())
        parts.append(pc.fill_null(text, scalar("null")))
    if not parts:
        inner = pa.array([""] * batch.num_rows, pa.string())
    else:
        inner = pc.binary_join_element_wise(*parts, ", ")
    return pc.binary_join_element_wise(kinds, inner, "]", "")


def debezium_envelope(names: list[str]) -> str:
    """The DuckDB SQL of a row ``r`` of a batch with columns ``names`` as a Debezium change, as
    Flink's 'debezium-json' format writes it: +I and +U as ``{"before": null, "after": {...},
    "op": "c"}``, -U and -D as ``{"before": {...}, "after": null, "op": "d"}``; a row without a
    row kind is an insert."""
    columns = [n for n in names if n != ROW_KIND]
    row = "struct_pack(" + ", ".join(f"{quote_ident(n)} := r.{quote_ident(n)}" for n in columns) + ")"
    kind = f"r.{quote_ident(ROW_KIND)}" if ROW_KIND in names else str(INSERT)
    retracts = f"{kind} IN ({UPDATE_BEFORE}, {DELETE})"
    return (f"json_object('before', CASE WHEN {retracts} THEN {row} END, "
            f"'after', CASE WHEN NOT {retracts} THEN {row} END, "
            f"'op', CASE WHEN {retracts} THEN 'd' ELSE 'c' END)")

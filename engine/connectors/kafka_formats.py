"""Kafka message keys and values as Arrow columns, and back: the formats json, csv, raw and
debezium-json.

Decoding is one pyarrow call per batch of messages: the values are joined into one buffer
and read with ``pyarrow.json.read_json`` or ``pyarrow.csv.read_csv`` against the declared
columns. Only a batch that fails is looked at message by message (to name the bad one, or to
skip it with '<format>.ignore-parse-errors'). Encoding renders a whole batch with DuckDB's
``to_json`` or pyarrow's csv writer; a format keeps one in-memory DuckDB connection for its
batches (connecting costs ~30 ms of CPU, rendering 1,000 rows ~6 ms).
"""
from __future__ import annotations

import io
import threading
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, ROW_KIND_TYPE, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.connectors.file_readers import conform
from weir.engine.connectors.text_format import debezium_envelope, timestamps_as_text
from weir.engine.errors import ConnectorOptionError, SourceError
from weir.engine.pandas_import import scalar

FORMATS = ("json", "csv", "raw", "debezium-json")


@dataclass
class Decoded:
    #: The declared columns of the messages that decoded.
    rows: pa.Table
    #: Positions (in the input) of the messages in ``rows``, or None when all decoded.
    kept: pa.Array | None = None
    #: Messages that did not decode: (position, reason).
    bad: list[tuple[int, str]] | None = None


class Format:
    """One format over a fixed set of columns (the value's or the key's)."""

    def __init__(self, name: str, schema: pa.Schema, *, delimiter: str = ",", what: str = "value"):
        self.name = name
        self.schema = schema
        self.delimiter = delimiter
        self.what = what
        #: The DuckDB connection that renders json and debezium-json batches (made on first use).
        self._renderer: duckdb.DuckDBPyConnection | None = None
        self._renderer_lock = threading.Lock()
        if name == "raw" and (len(schema) != 1 or not (pa.types.is_string(schema[0].type)
                                                       or pa.types.is_binary(schema[0].type))):
            raise ConnectorOptionError(
                f"the 'raw' {what} format needs exactly one STRING or BYTES column, "
                f"not {', '.join(f.name for f in schema) or 'none'}",
                hint="declare one STRING column for the message, or use 'json' or 'csv'")

    def __getstate__(self) -> dict:  # (a DuckDB connection and a lock do not pickle)
        return {**self.__dict__, "_renderer": None, "_renderer_lock": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, _renderer_lock=threading.Lock())

    # -- decoding --------------------------------------------------------------------------
    def decode(self, values: pa.Array) -> Decoded:
        """The messages ``values`` (binary, no nulls) as rows of ``self.schema``."""
        if self.name == "raw":
            column = values if pa.types.is_binary(self.schema[0].type) else pc.cast(values, pa.string())
            return Decoded(pa.Table.from_arrays([column], schema=self.schema))
        try:
            return Decoded(self._parse(values))
        except (pa.ArrowInvalid, SourceError):
            pass
        bad, good = [], []
        for i, value in enumerate(values.to_pylist()):  # only a batch that failed: find the bad ones
            try:
                self._parse(pa.array([value], pa.binary()))
                good.append(i)
            except (pa.ArrowInvalid, SourceError) as error:
                bad.append((i, f"{str(error).splitlines()[0][:200].replace(' in row 0', '')}: {value[:120]!r}"))
        kept = pa.array(good, pa.int64())
        rows = self._parse(values.take(kept)) if good else self.schema.empty_table()
        return Decoded(rows, kept, bad)

    def _parse(self, values: pa.Array) -> pa.Table:
        if len(values) == 0:
            return self.schema.empty_table()
        if self.name == "csv":
            data = _joined(values, b"\n")
            table = pa_csv.read_csv(
                io.BytesIO(data),
                read_options=pa_csv.ReadOptions(column_names=self.schema.names, use_threads=False,
                                                block_size=max(len(data) + 1, 1 << 16)),
                parse_options=pa_csv.ParseOptions(delimiter=self.delimiter),
                convert_options=pa_csv.ConvertOptions(column_types=_text_types(self.schema),
                                                      strings_can_be_null=True, quoted_strings_can_be_null=False))
        else:  # json, debezium-json
            data = _joined(values, b"\n")
            multiline = data.count(b"\n") != len(values) - 1
            schema = self.schema if self.name == "json" else _debezium_schema(self.schema)
            table = pa_json.read_json(
                io.BytesIO(data),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 16)),
                parse_options=pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore",
                                                   newlines_in_values=multiline))
        if table.num_rows != len(values):
            raise SourceError(f"{len(values)} messages decoded as {table.num_rows} rows")
        if self.name == "debezium-json":
            return table
        return conform(table, self.schema, f"{self.what} ({self.name})")

    # -- encoding --------------------------------------------------------------------------
    def encode(self, batch: pa.RecordBatch) -> pa.Array:
        """One message (binary) per row of ``batch`` (its columns: ``self.schema``'s)."""
        if self.name == "raw":
            return pc.cast(batch.column(0), pa.binary())
        if self.name == "csv":
            sink = io.BytesIO()
            pa_csv.write_csv(timestamps_as_text(batch), sink, pa_csv.WriteOptions(
                include_header=False, delimiter=self.delimiter, quoting_style="needed"))
            lines = sink.getvalue().rstrip(b"\n").split(b"\n") if batch.num_rows else []
            return pa.array(lines, pa.binary())
        with self._renderer_lock:
            if self._renderer is None:
                self._renderer = duckdb.connect(":memory:")
            return _duckdb_json(self._renderer, batch, self.name == "debezium-json")


def _joined(values: pa.Array, separator: bytes) -> bytes:
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values), separator)
    return joined[0].as_py()


def _text_types(schema: pa.Schema) -> dict[str, pa.DataType]:
    return {f.name: (pa.string() if pa.types.is_timestamp(f.type) else f.type) for f in schema}


def _debezium_schema(schema: pa.Schema) -> pa.Schema:
    row = pa.struct(list(schema))
    return pa.schema([pa.field("before", row), pa.field("after", row), pa.field("op", pa.string())])


def debezium_changes(envelopes: pa.Table, schema: pa.Schema) -> pa.Table:
    """Debezium envelopes as a changelog: 'c' and 'r' are +I, 'u' is -U (before) then +U
    (after), 'd' is -D (before), in the order of the messages; rows end with ``_row_kind``."""
    op = envelopes.column("op").combine_chunks()
    n = len(op)
    position = pa.array(range(n), pa.int64())
    befores = pc.is_in(op, pa.array(["u", "d"], pa.string()))
    afters = pc.is_in(op, pa.array(["c", "r", "u"], pa.string()))
    unknown = pc.invert(pc.or_kleene(befores, afters))
    if pc.any(pc.fill_null(unknown, True)).as_py():
        bad = pc.filter(op, pc.fill_null(unknown, True))[0].as_py()
        raise SourceError(f"a debezium-json message has the op {bad!r}; known are 'c', 'r', 'u' and 'd'",
                          hint="read Debezium change events, or skip such messages with "
                               "'debezium-json.ignore-parse-errors' = 'true'")
    parts = []
    for side, mask in (("before", befores), ("after", afters)):
        rows = pc.filter(envelopes.column(side).combine_chunks(), mask)
        at = pc.filter(position, mask)
        ops = pc.filter(op, mask)
        if side == "before":
            kinds = pc.if_else(pc.equal(ops, scalar("u")), scalar(UPDATE_BEFORE), scalar(DELETE))
        else:
            kinds = pc.if_else(pc.equal(ops, scalar("u")), scalar(UPDATE_AFTER), scalar(INSERT))
        table = pa.Table.from_arrays([rows.field(i) for i in range(rows.type.num_fields)], names=schema.names)
        parts.append(table.append_column("_at", pc.add(pc.multiply(at, scalar(2)), scalar(0 if side == "before" else 1)))
                     .append_column(ROW_KIND, pc.cast(kinds, ROW_KIND_TYPE)))
    changes = pa.concat_tables(parts).sort_by("_at").drop_columns(["_at"])
    conformed = conform(changes.select(schema.names), schema, "value (debezium-json)")
    return conformed.append_column(ROW_KIND, changes.column(ROW_KIND))


def _duckdb_json(connection: duckdb.DuckDBPyConnection, batch: pa.RecordBatch, debezium: bool) -> pa.Array:
    connection.register("rows", timestamps_as_text(batch, " "))
    try:
        if not debezium:
            query = "SELECT CAST(to_json(r) AS VARCHAR) AS line FROM rows AS r"
        else:
            query = f"SELECT CAST({debezium_envelope(batch.schema.names)} AS VARCHAR) AS line FROM rows AS r"
        lines = connection.sql(query).to_arrow_table().column("line").combine_chunks()
    finally:
        connection.unregister("rows")
    return pc.cast(lines, pa.binary())

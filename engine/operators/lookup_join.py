"""LookupJoin: each row of a stream joined with a table as it is when the row arrives.

Flink's lookup join (``JOIN dim FOR SYSTEM_TIME AS OF s.proc_time``). Config (``LookupJoinConfig``)::

    join_type: "inner" | "left"
    keys:      (stream column, ...)
    names:     (output name per stream column, ...)
    lookup:    LookupTable(table=name, options={WITH options}, schema=<schema_to_json>,
                           keys=(table column, ...), names=(output name per table column, ...))
    residual:  SQL over the output names, or None

The table is read through its connector:

- ``duckdb``: the table ``'table-name'`` in the DuckDB file ``'path'``, queried
  for every batch (attached read-only for the query and detached again, so
  that whoever writes the file between batches can), so each batch sees the
  table's current rows — the lookup has no cache, as Flink's JDBC default;
- any other bounded source (a ``filesystem`` csv, json or parquet file, say):
  read once when the operator opens, as a side input.

Per batch one SQL statement joins the batch with the table on the keys (and
the residual condition); rows keep their order, an updating stream's
``_row_kind`` rides along. The operator keeps no state.
With ``bad_rows`` ('python.udf.bad-rows.table') a pair on which a Python UDF of the residual raises
does not match (a LEFT join's row may then be padded) and goes to the job's bad-rows table
(``engine.operators.bad_pairs``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from weir.engine.changelog import ROW_KIND
from weir.engine.errors import EngineError
from weir.engine.operators.bad_pairs import BadPairs
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.schemas import schema_from_json
from weir.engine.udfs import UdfError
from weir.engine.operators.base import OperatorContext, StateOperator, explain_lines
from weir.engine.operators.batches import conform, positions
from weir.engine.operators.duckdb_sql import execute, query_arrow, quote_ident

BATCH = "lookup_batch"
SIDE_INPUT = "lookup_rows"
DATABASE = "lookup_db"


@dataclass(frozen=True)
class LookupTable(OperatorConfig):
    """The table a lookup join reads, through its connector."""

    table: str
    #: Its WITH options.
    options: dict[str, str]
    #: Its columns (``engine.graph.schema_to_json``).
    schema: str
    keys: tuple[str, ...]
    #: The output name of each of its columns.
    names: tuple[str, ...]


@dataclass(frozen=True)
class LookupJoinConfig(OperatorConfig):
    #: "inner" or "left".
    join_type: str
    #: The stream's key columns.
    keys: tuple[str, ...]
    #: The output name of each stream column.
    names: tuple[str, ...]
    lookup: LookupTable
    #: SQL over the output names, or None.
    residual: str | None = None
    #: A pair a Python UDF of the residual raises on is no match, kept in the job's bad-rows table
    #: (``engine.operators.bad_pairs``; 'python.udf.bad-rows.table').
    bad_rows: bool = optional(False)


class LookupJoin(StateOperator):
    Config = LookupJoinConfig

    @classmethod
    def explain(cls, config: LookupJoinConfig) -> list[str]:
        lookup = config.lookup
        if lookup.options.get("connector") == "duckdb":
            return explain_lines("-", f"none (`{lookup.table}` is queried for every batch)")
        return explain_lines("-", f"`{lookup.table}`, read once when the job starts")

    def __init__(self, config: LookupJoinConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        oid = ctx.operator_id
        self.join_type = config.join_type
        self.keys = list(config.keys)
        self.names = list(config.names)
        lookup = config.lookup
        self.table = lookup.table
        self.options = dict(lookup.options)
        self.schema = schema_from_json(lookup.schema)
        self.lookup_keys = list(lookup.keys)
        self.lookup_names = list(lookup.names)
        if self.join_type not in ("inner", "left"):
            raise EngineError(f"a lookup join is INNER or LEFT, not {self.join_type!r}", operator_id=oid)
        self.residual = config.residual or None
        self.connector = self.options.get("connector")
        self._bad_pairs = BadPairs(ctx, [*self.names, *self.lookup_names]) \
            if config.bad_rows and self.residual else None

    def create_state(self) -> None:
        """A file is read once, as a side input; a duckdb table is queried per batch."""
        if self.connector == "duckdb":
            return
        from weir.engine.connectors.registry import create_source

        source = create_source(self.options, self.schema)
        if not source.bounded:
            raise EngineError(f"the lookup table `{self.table}` is unbounded",
                              hint="look up a duckdb table or a file", operator_id=self.ctx.operator_id)
        batches = [batch for split in source.splits() for batch, _ in source.read(split)]
        table = pa.Table.from_batches(batches, self.schema)
        self.con.register("loaded", table)
        try:
            execute(self.con, f"CREATE TABLE {SIDE_INPUT} AS SELECT * FROM loaded", self.ctx.operator_id)
        finally:
            self.con.unregister("loaded")

    def _lookup_relation(self) -> str:
        """The lookup table's columns under their output names."""
        columns = ", ".join(f"{quote_ident(c)} AS {quote_ident(n)}" for c, n in zip(self.schema.names, self.lookup_names))
        if self.connector == "duckdb":
            name = self.options.get("table-name") or self.table
            return f"SELECT {columns} FROM {DATABASE}.main.{quote_ident(name)}"
        return f"SELECT {columns} FROM {SIDE_INPUT}"

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        changelog = ROW_KIND in batch.schema.names
        stream_columns = [c for c in batch.schema.names if c != ROW_KIND]
        named = ", ".join(f"{quote_ident(c)} AS {quote_ident(n)}" for c, n in zip(stream_columns, self.names))
        ordered = pa.RecordBatch.from_arrays([positions(batch.num_rows), *batch.columns],
                                             names=["_ord", *batch.schema.names])
        keys = " AND ".join(
            f"s.{quote_ident(self.names[stream_columns.index(k)])} = t.{quote_ident(self.lookup_names[self.schema.names.index(lk)])}"
            for k, lk in zip(self.keys, self.lookup_keys))
        condition = f"{keys} AND ({self.residual})" if self.residual else keys
        outputs = ", ".join([*(f"s.{quote_ident(n)}" for n in self.names), *(f"t.{quote_ident(n)}" for n in self.lookup_names)]
                            + ([f"s.{ROW_KIND}"] if changelog else []))
        kind = ", " + ROW_KIND if changelog else ""
        stream = f"(SELECT _ord, {named}{kind} FROM {BATCH}) s"
        join = "LEFT JOIN" if self.join_type == "left" else "JOIN"
        sql = f"SELECT {outputs} FROM {stream} {join} ({self._lookup_relation()}) t ON {condition} ORDER BY s._ord"
        self.con.register(BATCH, ordered)
        attached = False
        try:
            if self.connector == "duckdb":
                self._attach()
                attached = True
            try:
                out = query_arrow(self.con, sql, self.ctx.operator_id)
            except UdfError as error:
                if self._bad_pairs is None:
                    raise
                self._bad_pairs.raised(error)
                out = self._caught(stream, join, keys, outputs, changelog)
        finally:
            if attached:
                execute(self.con, f"DETACH {DATABASE}", self.ctx.operator_id)
            self.con.unregister(BATCH)
        self.ctx.count("rows_out", out.num_rows)
        return conform(out, self.ctx.output_schema, self.ctx.operator_id)

    def _caught(self, stream: str, join: str, keys: str, outputs: str, changelog: bool) -> pa.Table:
        """The join with each pair a UDF of the residual raised on as no match (``bad_pairs``): the
        pairs of equal keys, the residual over them with its UDF calls caught, then the join again."""
        oid = self.ctx.operator_id
        candidates = query_arrow(self.con, f"SELECT s._ord, {outputs} FROM {stream} JOIN ({self._lookup_relation()}) t "
                                           f"ON {keys}", oid)
        self.con.register("matched_pairs", self._bad_pairs.matches(self.con, candidates, self.residual))
        try:
            kept = ", ".join([*(f"s.{quote_ident(n)}" for n in self.names),
                              *(f"m.{quote_ident(n)}" for n in self.lookup_names)] + ([f"s.{ROW_KIND}"] if changelog else []))
            return query_arrow(self.con, f"SELECT {kept} FROM {stream} {join} matched_pairs m ON s._ord = m._ord "
                                         "ORDER BY s._ord", oid)
        finally:
            self.con.unregister("matched_pairs")

    def close(self) -> None:
        if self._bad_pairs is not None:
            self._bad_pairs.close()
        super().close()

    def _attach(self) -> None:
        path = self.options.get("path")
        try:
            self.con.execute(f"ATTACH '{path.replace(chr(39), chr(39) * 2)}' AS {DATABASE} (READ_ONLY)")
        except Exception as exc:  # duckdb.IOException, a missing file, a lock held by a writer
            raise EngineError(f"cannot open the lookup table `{self.table}` in {path}: {str(exc).splitlines()[0]}",
                              hint="check 'path'; a process writing the file must close it between commits",
                              operator_id=self.ctx.operator_id) from exc

"""Rows a windowed operator drops as late: counted per source table, and kept where asked.

A row is late when the watermark it met — its arrival watermark
(``engine.watermarks``), or the operator's own if that is larger — has passed
the end of every window it would count in: those windows fired already. Every windowed operator counts such
rows (``OperatorContext.count_late``: in total and per source table). When the
source's ``'source.late-rows.table'`` option is set, the planner adds to the
operator's config ``late_rows`` (``LateRowsConfig``)::

    {"<input index>": ((name, sql), ...)}

the late-rows table's columns, as SQL over the operator's input rows (the
source's columns, NULL where the query dropped one before the window). The
operator then also hands the late rows, with its id (``weir_operator``) and
the watermark they were behind (``weir_watermark``), to
``OperatorContext.late_output``; the executor sends them out of the
operator's ``LATE_ROWS_PORT`` to the table's sink. Per row, so the table holds
the rows Flink drops, whatever the batch size or parallelism.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.operators.base import OperatorContext
from weir.engine.operators.duckdb_sql import int_literal, query_arrow, quote_ident, string_literal
from weir.engine.udfs import register_functions
from weir.engine.watermarks import without_arrival

LATE_INPUT = "late_input"
OPERATOR_COLUMN = "weir_operator"
WATERMARK_COLUMN = "weir_watermark"
#: The column of each late row's watermark in the rows ``_rows`` projects.
LATE_WATERMARK = "__weir_late_watermark"


#: A config's ``late_rows``: input index (as text, a JSON key) -> the late-rows table's columns.
LateRowsConfig = dict[str, tuple[tuple[str, str], ...]]


class LateRows:
    def __init__(self, late_rows: LateRowsConfig | None, ctx: OperatorContext):
        self.ctx = ctx
        self.projections: dict[int, tuple[tuple[str, str], ...]] = {
            int(index): projection for index, projection in (late_rows or {}).items()
        }
        self._con: duckdb.DuckDBPyConnection | None = None

    def drop(self, batch: pa.RecordBatch, late: pa.BooleanArray, watermark: int | pa.Array,
             input_index: int = 0) -> int:
        """Count the rows of ``batch`` that ``late`` selects, and keep them if the source asks;
        how many there were. ``watermark`` is the one they were behind, per row
        (``engine.watermarks.row_watermarks``) or for all. (The caller leaves them out of its state.)"""
        late = pc.fill_null(late, False)
        count = pc.sum(late).as_py() or 0
        self.ctx.count_late(count, input_index)
        projection = self.projections.get(input_index)
        if count and projection:
            rows = without_arrival(batch.filter(late))
            if isinstance(watermark, int):
                behind = f"make_timestamp({int_literal(watermark)})"
            else:
                rows = rows.append_column(LATE_WATERMARK, pc.filter(watermark, late))
                behind = f"make_timestamp({quote_ident(LATE_WATERMARK)})"
            self.ctx.late_output.extend(self._rows(rows, projection, behind))
        return count

    def _rows(self, rows: pa.RecordBatch, projection: list[list[str]], behind: str) -> list[pa.RecordBatch]:
        if self._con is None:
            self._con = duckdb.connect(":memory:")
            register_functions(self._con)  # a computed column may call a Python UDF
        columns = [f"{sql} AS {quote_ident(name)}" for name, sql in projection]
        columns += [f"{string_literal(self.ctx.operator_id)} AS {OPERATOR_COLUMN}",
                    f"{behind} AS {WATERMARK_COLUMN}"]
        self._con.register(LATE_INPUT, rows)
        try:
            table = query_arrow(self._con, f"SELECT {', '.join(columns)} FROM {LATE_INPUT}", self.ctx.operator_id)
        finally:
            self._con.unregister(LATE_INPUT)
        return table.to_batches()

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

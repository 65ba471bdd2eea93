"""Rows an operator drops: late rows of a windowed operator, counted per source table and kept
where asked; and rows a Python UDF raised on (``BadRows``, at the end), kept in the job's
bad-rows table.

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

import json

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.changelog import INSERT, ROW_KIND, UPDATE_AFTER
from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.duckdb_sql import int_literal, query_arrow, quote_ident, string_literal
from weir.engine.udfs import UdfError, UdfFailure, register_functions
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


# -- bad rows: rows a Python UDF raised on -----------------------------------------------------------

FUNCTION_COLUMN = "weir_function"
ERROR_COLUMN = "weir_error"
ARGUMENTS_COLUMN = "weir_arguments"
ROW_COLUMN = "weir_row"
#: The bad-rows table's columns (``'python.udf.bad-rows.table'``): every operator's bad rows fit it.
BAD_ROWS_SCHEMA = pa.schema([pa.field(OPERATOR_COLUMN, pa.string()), pa.field(FUNCTION_COLUMN, pa.string()),
                             pa.field(ERROR_COLUMN, pa.string()), pa.field(ARGUMENTS_COLUMN, pa.string()),
                             pa.field(ROW_COLUMN, pa.string())])
BAD_INPUT = "bad_input"
#: The column numbering a failing batch's rows while ``BadRows`` catches its UDF calls.
ROW_NUMBER = "__weir_row_number"


class BadRows:
    """Rows whose Python UDF call raised, left out of an operator's output and handed to its
    ``LATE_ROWS_PORT`` (the job's bad-rows table) instead of failing the job.

    ``evaluate(run, batch, catch)`` returns ``run(batch)`` (a pyarrow Table) — the vectorised path,
    once per batch. Only when that raises the function's own exception (a ``UdfError`` carrying
    a ``UdfFailure`` that weir did not raise) is the batch evaluated once more, by ``catch(rows)``:
    the same statement over the rows numbered in ``ROW_NUMBER``, passing that column on, with
    each UDF call caught row by row where a chunk raised (``engine.udfs.catching``): it names
    every raising row and its first failure, and its output without those rows is the result.
    A batch with k bad rows costs two statements whatever k (and one more for their JSON).
    With ``retractions_listed`` False (a ``Calc``) a -U or -D row that raised is left out unlisted:
    a changelog retracts only what it added, and the row raised when it was added (listed then).
    Should ``catch`` fail (weir's own complaint, a call it did not catch), the batch is split in
    halves, each evaluated again by ``run``, down to the single rows that raise.
    The output keeps the input's order. Each bad row becomes one row of ``BAD_ROWS_SCHEMA``:
    the operator, the function, its error, its arguments (JSON) and the operator's input row
    (JSON, DuckDB's ``to_json``); counted in ``udf_bad_rows``. Deterministic per row, so
    the table's rows do not depend on batch size, parallelism or restarts.
    """

    def __init__(self, ctx: OperatorContext, *, retractions_listed: bool = True):
        self.ctx = ctx
        self.retractions_listed = retractions_listed
        self._con: duckdb.DuckDBPyConnection | None = None

    def evaluate(self, run, batch: pa.RecordBatch, catch=None) -> pa.Table:
        try:
            return run(batch)
        except UdfError as error:
            self._check(error)
        caught = self._catch(catch, batch) if catch is not None else None
        if caught is not None:
            table, failures = caught
            bad = pa.array(sorted(failures), pa.int64())
            if len(bad):
                self.keep(batch.take(bad), [failures[i] for i in bad.to_pylist()])
            return table.filter(pc.invert(pc.is_in(table[ROW_NUMBER], value_set=bad))).drop_columns([ROW_NUMBER])
        parts = self._split(run, batch) or [run(batch.slice(0, 0))]  # every row bad: no rows, the schema
        return parts[0] if len(parts) == 1 else pa.concat_tables(parts)

    @staticmethod
    def _check(error: UdfError) -> None:
        failure = error.failure
        if failure is None or failure.raised is not None:
            raise error  # weir's own complaint (a result of the wrong type): a bug to fix, not a bad row

    def _catch(self, catch, batch: pa.RecordBatch) -> tuple[pa.Table, dict[int, UdfFailure]] | None:
        """``catch`` over ``batch`` numbered in ``ROW_NUMBER``: its result (with that column) and the
        raising rows' failures by number; None when catching failed (the halves then say why)."""
        numbered = batch.append_column(ROW_NUMBER, pa.array(range(batch.num_rows), pa.int64()))
        try:
            return catch(numbered)
        except EngineError:
            return None

    def _split(self, run, batch: pa.RecordBatch) -> list[pa.Table]:
        try:
            return [run(batch)]
        except UdfError as error:
            self._check(error)
            if batch.num_rows == 1:
                self.keep(batch, [error.failure])
                return []
            half = batch.num_rows // 2
            return self._split(run, batch.slice(0, half)) + self._split(run, batch.slice(half))

    def keep(self, rows: pa.RecordBatch, failures: list[UdfFailure]) -> None:
        if not self.retractions_listed and ROW_KIND in rows.schema.names:
            added = pc.is_in(rows[ROW_KIND], value_set=pa.array([INSERT, UPDATE_AFTER], rows[ROW_KIND].type))
            failures = [f for f, a in zip(failures, added.to_pylist()) if a]
            rows = rows.filter(added)
        if not failures:
            return
        if self._con is None:
            self._con = duckdb.connect(":memory:")
        self._con.register(BAD_INPUT, without_arrival(rows))
        try:
            texts = [text for text, in self._con.execute(f"SELECT to_json({BAD_INPUT}) FROM {BAD_INPUT}").fetchall()]
        finally:
            self._con.unregister(BAD_INPUT)
        self.keep_json(texts, failures)

    def keep_json(self, texts: list[str], failures: list[UdfFailure]) -> None:
        """Keep bad rows given as their input rows' JSON (``texts``: an operator that kept the rows
        as JSON, a session window's pending rows) with their ``failures``."""
        for failure, text in zip(failures, texts, strict=True):
            arguments = json.dumps(list(failure.values), default=str)
            self.ctx.late_output.append(pa.RecordBatch.from_arrays(
                [pa.array([v], pa.string()) for v in (self.ctx.operator_id, failure.name, failure.error, arguments,
                                                      text)],
                schema=BAD_ROWS_SCHEMA))
        self.ctx.count("udf_bad_rows", len(failures))

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None

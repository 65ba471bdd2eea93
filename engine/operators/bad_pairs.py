"""Bad pairs: the joined rows on which a Python UDF of a join's condition raised, with the bad-rows
setting ('python.udf.bad-rows.table').

A join that evaluates a condition calling a Python UDF itself (an outer or semi/anti join's
residual condition: an inner join's is a filter after it, a ``calc``) keeps ``BadPairs``. Such a
pair does not match, as if its condition were FALSE, and goes to the job's bad-rows table: its
``weir_row`` is the joined row (both inputs' columns, under the join's output names), so the rows of
both inputs that made the UDF raise are named. The join runs its usual statement; only when that
raised the function's own exception are the candidate pairs (keys equal) read out and
``matches`` evaluates the condition over them once more with every UDF call caught row by row
(``late_rows.BadRows.evaluate``, ``engine.udfs.catching``; halves of the pairs should catching
fail). A pair is evaluated whenever the join meets it, so each pair of two append-only inputs is
listed once, whatever the batch sizes or the order the inputs' rows arrive in; a change of an
updating input that meets the pair again lists it again.
"""
from __future__ import annotations

import duckdb
import pyarrow as pa

from weir.engine.operators.base import OperatorContext
from weir.engine.operators.duckdb_sql import query_arrow
from weir.engine.operators.late_rows import ROW_NUMBER, BadRows
from weir.engine.udfs import UdfError, UdfFailure, catching

CANDIDATES = "udf_condition_candidates"


class BadPairs(BadRows):
    """``BadRows`` for a join's candidate pairs: ``shown`` are the columns a bad pair is listed by."""

    def __init__(self, ctx: OperatorContext, shown: list[str]):
        super().__init__(ctx)
        self.shown = shown

    def keep(self, rows: pa.RecordBatch, failures: list[UdfFailure]) -> None:
        super().keep(rows.select(self.shown), failures)

    def raised(self, error: UdfError) -> None:
        """Raise ``error`` again unless it is a Python UDF's own exception (then a pair is bad)."""
        self._check(error)

    def matches(self, con: duckdb.DuckDBPyConnection, candidates: pa.Table, condition: str) -> pa.Table:
        """The rows of ``candidates`` (every column passed on, in order) on which ``condition``,
        SQL over their columns evaluated on ``con``, is true; those a UDF of it raised on are kept
        as bad pairs instead."""
        query = f"SELECT * FROM {CANDIDATES} WHERE ({condition})"

        def run(rows) -> pa.Table:
            con.register(CANDIDATES, rows)
            try:
                return query_arrow(con, query, self.ctx.operator_id)
            finally:
                con.unregister(CANDIDATES)

        def catch(numbered) -> tuple[pa.Table, dict]:
            sql, failures = catching(con, query, ROW_NUMBER)
            return run(numbered), failures

        batches = candidates.combine_chunks().to_batches()
        batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=candidates.schema)
        return self.evaluate(run, batch, catch)

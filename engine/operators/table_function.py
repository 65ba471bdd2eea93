"""Table function: Flink's Correlate, ``FROM t, LATERAL TABLE(f(x)) AS T(a, b)``.

Config (``TableFunctionConfig``): ``function`` (the Python table function's
``engine.udtfs.TableFunctionSpec``), ``arguments`` (the input columns passed to it, in order),
``passed`` (the input columns the output keeps, in order), ``columns`` (the output names of the
function's result columns f0, f1, ...) and ``outer`` (``LEFT JOIN LATERAL ... ON TRUE``).

It keeps no state: each batch is transformed on its own, at any parallelism, on a forward edge.
Per batch:

1. the argument columns go to the function (``engine.udtfs.apply``): a call per row
   (``general``) or one per batch (``arrow``), giving every output row's input row index and
   the result columns;
2. with ``outer``, each input row without output gets one row of NULLs (``udtfs.left_outer``);
3. the ``passed`` columns are taken from the input rows by that index (``pyarrow`` ``take``)
   beside the result columns. Every output row of an input row carries its row kind
   (``_row_kind`` is passed: a ``-U`` row's outputs are ``-U`` rows), and its arrival watermark,
   so the time attributes and watermarks of the input hold for the output.

With ``bad_rows`` ('python.udf.bad-rows.table') an input row the function raises on gives no
output (not even LEFT JOIN's NULLs) and goes, whole, to the job's bad-rows table
(``late_rows.BadRows.keep``). The batch is applied as usual; only when that raised the
function's own exception is it applied again with each row's exception caught
(``engine.udtfs.apply_catching``): a call per row for the general form, halves of the batch
down to the raising rows for the arrow form. Per row, so batch sizes do not change which rows
are bad.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from weir.engine.operators.base import Operator, OperatorContext, explain_lines
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.late_rows import BadRows
from weir.engine.udfs import UdfError
from weir.engine.udtfs import TableFunction, TableFunctionSpec, apply, apply_catching, function_for, left_outer
from weir.engine.watermarks import ARRIVAL_FIELD, ARRIVAL_WATERMARK, PASS, has_arrival
from weir.engine.pandas_import import arrow_array


@dataclass(frozen=True)
class TableFunctionConfig(OperatorConfig):
    function: TableFunctionSpec
    #: The input columns passed to the function, in order.
    arguments: tuple[str, ...]
    #: The input columns kept in the output, in order (before the function's columns).
    passed: tuple[str, ...]
    #: The output names of the function's columns (``AS T(a, b)``; f0, f1, ... without).
    columns: tuple[str, ...]
    #: LEFT JOIN ... ON TRUE: an input row the function yields nothing for is kept, with NULLs.
    outer: bool = False
    #: Rows the function raises on go to the job's bad-rows table instead of failing the job
    #: (``engine.operators.late_rows.BadRows``; 'python.udf.bad-rows.table').
    bad_rows: bool = optional(False)


class TableFunctionOperator(Operator):
    Config = TableFunctionConfig
    arrival_watermark = PASS
    #: It calls a Python function whatever its config says: the bad-rows setting applies to it.
    calls_python = True

    @classmethod
    def explain(cls, config: TableFunctionConfig) -> list[str]:
        return explain_lines("-", "none")

    def __init__(self, config: TableFunctionConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        self._function: TableFunction | None = None
        self._bad_rows = BadRows(ctx) if self.config.bad_rows else None

    def open(self) -> None:
        if self._function is None:
            try:
                self._function = function_for(self.config.function)
            except UdfError as error:
                raise UdfError(error.message, hint=error.hint, operator_id=self.ctx.operator_id) from None

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        config = self.config
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        arguments = [batch.column(name) for name in config.arguments]
        try:
            positions, results, bad = self._apply(batch, arguments)
            if config.outer:
                positions, results = left_outer(positions, results, batch.num_rows, bad)
        except UdfError as error:
            raise UdfError(error.message, hint=error.hint, operator_id=self.ctx.operator_id) from None
        if not len(positions):
            return []
        kept = batch.select([*config.passed, *([ARRIVAL_WATERMARK] if has_arrival(batch) else [])])
        kept = kept.take(arrow_array(positions))
        by_name = dict(zip(config.columns, results))
        schema = self.ctx.output_schema
        arrays = [by_name[f.name] if f.name in by_name else kept.column(f.name) for f in schema]
        if has_arrival(batch):
            arrays.append(kept.column(ARRIVAL_WATERMARK))
            schema = schema.append(ARRIVAL_FIELD)
        arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, schema)]
        out = pa.RecordBatch.from_arrays(arrays, schema=schema)
        self.ctx.count("rows_out", out.num_rows)
        return [out]

    def _apply(self, batch: pa.RecordBatch, arguments: list[pa.Array]):
        """The function over the batch: output positions, result columns, and the bad rows' indices
        (kept in the bad-rows table; none without ``bad_rows``)."""
        try:
            return (*apply(self._function, arguments, batch.num_rows), ())
        except UdfError as error:
            if self._bad_rows is None or error.failure is None or error.failure.raised is not None:
                raise
        positions, results, failures = apply_catching(self._function, arguments, batch.num_rows)
        bad = sorted(failures)
        self._bad_rows.keep(batch.take(pa.array(bad, pa.int64())), [failures[i] for i in bad])
        return positions, results, bad

    def close(self) -> None:
        if self._bad_rows is not None:
            self._bad_rows.close()

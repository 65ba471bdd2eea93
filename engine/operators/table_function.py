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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from weir.engine.operators.base import Operator, OperatorContext, explain_lines
from weir.engine.operators.config import OperatorConfig
from weir.engine.udfs import UdfError
from weir.engine.udtfs import TableFunction, TableFunctionSpec, apply, function_for, left_outer
from weir.engine.watermarks import ARRIVAL_FIELD, ARRIVAL_WATERMARK, PASS, has_arrival


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


class TableFunctionOperator(Operator):
    Config = TableFunctionConfig
    arrival_watermark = PASS

    @classmethod
    def explain(cls, config: TableFunctionConfig) -> list[str]:
        return explain_lines("-", "none")

    def __init__(self, config: TableFunctionConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        self._function: TableFunction | None = None

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
            positions, results = apply(self._function, arguments, batch.num_rows)
            if config.outer:
                positions, results = left_outer(positions, results, batch.num_rows)
        except UdfError as error:
            raise UdfError(error.message, hint=error.hint, operator_id=self.ctx.operator_id) from None
        if not len(positions):
            return []
        kept = batch.select([*config.passed, *([ARRIVAL_WATERMARK] if has_arrival(batch) else [])])
        kept = kept.take(pa.array(positions))
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

"""WindowAssign: a TUMBLE, HOP or CUMULATE window table function over append-only rows, without
an aggregate after it: every row with its window's ``window_start``, ``window_end`` and
``window_time`` (``window_end`` - 1 ms), computed in numpy.

Config (``WindowAssignConfig``)::

    window: SlicedWindowConfig(kind="hop", time_column="date_time", size=10000000, slide=2000000, offset=0)

The output is the input's columns (``columns`` of them, when the planner names the ones the query
reads: the source then leaves the others out), then the three bounds (the last three columns of the
output schema), then the rows' arrival watermarks if they came with them. Windows are aligned to the
epoch plus ``offset``; with ``floor(t, w) = t - (t - offset) mod w`` (a non-negative mod) of the
row's time ``t`` in µs:

- TUMBLE: one row per input row, ``[floor(t, size), floor(t, size) + size)``; a NULL time gives
  NULL bounds.
- HOP: a row per window the time is in, the input row repeated ``size / slide`` times: the
  starts ``floor(t, slide) - size + slide, ...`` up to ``floor(t, slide)`` by ``slide``, in that order.
- CUMULATE: a row per window of the time's ``size``-aligned period that holds it: start
  ``floor(t, size)``, the ends ``floor(t, step) + step, ...`` up to ``floor(t, size) + size`` by
  ``step``, in that order.

A HOP or CUMULATE row with a NULL time is in no window and leaves no row. This is the SQL the
planner states the window table function by (``planner.windows.WindowSpec.assign_sql``,
``unnest`` of ``range``), done as int64 arithmetic on the time column's int64 view and viewed
back as timestamps: one pass per bound instead of DuckDB's ``make_timestamp`` per row.
No state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.operators.base import Operator, OperatorContext, explain_lines
from weir.engine.operators.batches import conform
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.duckdb_sql import quote_ident
from weir.engine.operators.windows import (WINDOW_TIME_LAG_US, SlicedWindowConfig, align_numpy, event_times,
                                           window_assigner)
from weir.engine.pandas_import import arrow_array, numpy_values, scalar
from weir.engine.watermarks import ARRIVAL_WATERMARK, PASS

TIMESTAMP = pa.timestamp("us")


@dataclass(frozen=True)
class WindowAssignConfig(OperatorConfig):
    window: SlicedWindowConfig
    #: The input columns passed on, in order; None: every one.
    columns: tuple[str, ...] | None = optional()


def window_bounds(kind: str, ts: np.ndarray, size: int, part: int, offset: int) -> tuple[np.ndarray, ...]:
    """(row index, window_start, window_end) per output row for int64 µs times ``ts`` without
    NULLs: each row once per window it is in (TUMBLE: ``part`` is the size; HOP: the slide;
    CUMULATE: the step). ``row index`` is None where every row is one output row (TUMBLE)."""
    if kind == "tumble":
        start = align_numpy(ts, size, offset)
        return None, start, start + size
    if kind == "hop":
        per_row = size // part
        index = np.repeat(np.arange(len(ts)), per_row)
        first = align_numpy(ts, part, offset) - (size - part)
        start = np.repeat(first, per_row) + np.tile(np.arange(per_row, dtype=np.int64) * part, len(ts))
        return index, start, start + size
    # cumulate: the ends from the row's step on, to its period's end
    period = align_numpy(ts, size, offset)
    first_end = align_numpy(ts, part, offset) + part
    counts = (period + size - first_end) // part + 1
    index = np.repeat(np.arange(len(ts)), counts)
    firsts = np.cumsum(counts) - counts  # each row's first output row
    within = np.arange(len(index), dtype=np.int64) - np.repeat(firsts, counts)
    return index, period[index], first_end[index] + within * part


class WindowAssign(Operator):
    Config = WindowAssignConfig
    arrival_watermark = PASS

    @classmethod
    def input_expressions(cls, config: WindowAssignConfig) -> list[str] | None:
        if config.columns is None:
            return None
        return [quote_ident(name) for name in (*config.columns, config.window.time_column)]

    @classmethod
    def explain(cls, config: WindowAssignConfig) -> list[str]:
        return explain_lines("-", "none")

    def __init__(self, config: WindowAssignConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        window = self.config.window
        assigner = window_assigner(window, ctx.operator_id)  # (checks the sizes)
        self.kind = assigner.kind
        self.size, self.part, self.offset = assigner.size, assigner.slice_size, assigner.offset
        self.time_column = window.time_column
        self.columns = self.config.columns

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.ctx.count("rows_in", batch.num_rows)
        _, ts = event_times(batch, self.time_column, self.ctx.operator_id)  # (the batch keeps its unit)
        nulls = None
        if ts.null_count and self.kind == "tumble":  # the row stays, with NULL bounds
            nulls, ts = numpy_values(ts.is_null()), pc.fill_null(ts, scalar(0))
        elif ts.null_count:  # in no window
            valid = ts.is_valid()
            batch, ts = batch.filter(valid), ts.filter(valid)
        if batch.num_rows == 0:
            return []
        index, start, end = window_bounds(self.kind, numpy_values(ts), self.size, self.part, self.offset)
        bounds = [arrow_array(values, mask=nulls).view(TIMESTAMP) for values in (start, end, end - WINDOW_TIME_LAG_US)]
        arrival = batch.schema.get_field_index(ARRIVAL_WATERMARK)
        if self.columns is None:
            passed = [c for i, c in enumerate(batch.columns) if i != arrival]
        else:
            missing = [name for name in self.columns if name not in batch.schema.names]
            if missing:
                raise EngineError(f"the input lacks columns {missing}", operator_id=self.ctx.operator_id)
            passed = [batch.column(name) for name in self.columns]
        if arrival >= 0:
            passed.append(batch.column(arrival))
        if index is not None:  # each row once per window
            taken = arrow_array(index)
            passed = [c.take(taken) for c in passed]
        names = [f"c{i}" for i in range(len(passed) + len(bounds))]
        if arrival >= 0:  # kept last, as ``conform`` expects
            columns = [*passed[:-1], *bounds, passed[-1]]
            names[-1] = ARRIVAL_WATERMARK
        else:
            columns = [*passed, *bounds]
        out = pa.Table.from_arrays(columns, names=names)
        self.ctx.count("rows_out", out.num_rows)
        return conform(out, self.ctx.output_schema, self.ctx.operator_id)

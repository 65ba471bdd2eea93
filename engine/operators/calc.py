"""Calc: a stateless projection and filter, evaluated by DuckDB over each batch.

Config (``CalcConfig``): ``projection`` ((name, sql), ...), ``filter`` (sql or None) and,
optionally, ``expand`` (``Expand(column, count)``);
computes ``SELECT <sql> AS <name>, ... FROM batch WHERE <filter>`` per batch.
The rows' arrival watermarks (``engine.watermarks.ARRIVAL_WATERMARK``) pass
through as a last column when the batch has them.
With ``expand`` (Flink's Expand, for GROUPING SETS) every row is read ``n``
times, numbered 0..n-1 in the BIGINT column ``column``:
``... FROM batch CROSS JOIN range(n) AS expand(column) WHERE <filter>``.
A Python UDF call the statement makes on every row it reaches (in a projection item, a WHERE
conjunct, not under CASE, COALESCE, AND, OR...) is split out and called once over the whole
batch, once however often the statement repeats it, between DuckDB statements
(``python_calls``, Flink's PythonCalcSplitRule); a calc with Expand is evaluated unsplit.
With ``bad_rows`` a row a Python UDF raises on is left out and sent to the job's bad-rows
table (``late_rows.BadRows``: only a batch that failed is evaluated again, unsplit, once with its UDF
calls caught row by row, ``engine.udfs.catching``, then without its raising rows). A -U or -D
of a changelog that raises is left out unlisted: it retracts a row that raised, and was listed,
when it was added.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.operators.base import Operator, OperatorContext, explain_lines
from weir.engine.operators.batches import conform
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.duckdb_sql import query_arrow, quote_ident
from weir.engine.operators.late_rows import ROW_NUMBER, BadRows
from weir.engine.operators.python_calls import CalcSplit, split
from weir.engine.udfs import catching, current, register_functions
from weir.engine.watermarks import ARRIVAL_WATERMARK, PASS, has_arrival

INPUT_VIEW = "calc_input"


@dataclass(frozen=True)
class Expand(OperatorConfig):
    """Flink's Expand: every row read ``count`` times, numbered 0..count-1 in ``column``."""

    column: str
    count: int


@dataclass(frozen=True)
class CalcConfig(OperatorConfig):
    #: (output name, DuckDB SQL over the input), per output column.
    projection: tuple[tuple[str, str], ...]
    #: A WHERE condition, or None.
    filter: str | None = None
    expand: Expand | None = optional()
    #: Rows a Python UDF raises on go to the job's bad-rows table instead of failing the job
    #: (``engine.operators.late_rows.BadRows``; 'python.udf.bad-rows.table').
    bad_rows: bool = optional(False)


_QUOTED = re.compile(r'"((?:[^"]|"")+)"')


def _column_reference(sql: str) -> str | None:
    """The input column ``sql`` names when it is one quoted column reference (``"x"``), else None."""
    match = _QUOTED.fullmatch(sql)
    return match.group(1).replace('""', '"') if match else None


_SHIFT = re.compile(r'("(?:[^"]|"")+") ([+-]) INTERVAL (\d+) MICROSECOND')
#: Microseconds per unit of a timestamp.
_UNIT_US = {"s": 1_000_000, "ms": 1_000, "us": 1}
#: Times this far from the epoch (µs) are within DuckDB's TIMESTAMP range, both ways; a shift
#: that leaves it is left to DuckDB, whose error names it.
_DUCKDB_TIMESTAMP_US = 9_223_372_022_400_000_000


def _shifted_column(sql: str) -> tuple[str, int] | None:
    """(column, µs) when ``sql`` is a quoted column plus or minus a constant interval in µs
    (``"endtime" - INTERVAL 1000 MICROSECOND``: the planner's time of a cascaded window), else None."""
    match = _SHIFT.fullmatch(sql)
    if not match:
        return None
    micros = int(match.group(3))
    return _column_reference(match.group(1)), -micros if match.group(2) == "-" else micros


def _shift(column: pa.Array, micros: int) -> pa.Array | None:
    """A timestamp column shifted by ``micros`` in Arrow, on its int64 view (NULLs stay NULL);
    None where DuckDB must do it: not a timestamp, a shift finer than its unit, a time out of
    DuckDB's range."""
    if not pa.types.is_timestamp(column.type) or column.type.unit not in _UNIT_US:
        return None
    steps, rest = divmod(micros, _UNIT_US[column.type.unit])
    if rest:
        return None
    try:
        shifted = pc.add_checked(column.view(pa.int64()), pa.scalar(steps, pa.int64()))
    except pa.ArrowInvalid:  # past int64
        return None
    bound = _DUCKDB_TIMESTAMP_US // _UNIT_US[column.type.unit]
    low, high = pc.min_max(shifted).values()
    if low.is_valid and (low.as_py() < -bound or high.as_py() > bound):
        return None
    return shifted.view(column.type)


class Calc(Operator):
    Config = CalcConfig
    arrival_watermark = PASS

    @classmethod
    def explain(cls, config: CalcConfig) -> list[str]:
        return explain_lines("-", "none")

    @classmethod
    def input_expressions(cls, config: CalcConfig) -> list[str] | None:
        """Its projection and filter; with a bad-rows table every column (a raising row is kept
        as it came)."""
        if config.bad_rows:
            return None
        return [sql for _, sql in config.projection] + [config.filter or ""]

    def __init__(self, config: CalcConfig | dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        config = self.config
        projection = config.projection
        if not projection:
            raise EngineError(
                "calc needs a non-empty 'projection': [[name, sql], ...]",
                operator_id=ctx.operator_id,
            )
        columns = ", ".join(f"{sql} AS {quote_ident(name)}" for name, sql in projection)
        body = f" FROM {quote_ident(INPUT_VIEW)}"
        expand = config.expand
        if expand:
            body += f" CROSS JOIN range({int(expand.count)}) AS expand({quote_ident(expand.column)})"
        if config.filter:
            body += f" WHERE {config.filter}"
        self.query = f"SELECT {columns}{body}"
        arrival, number = quote_ident(ARRIVAL_WATERMARK), quote_ident(ROW_NUMBER)
        arrival = f", {quote_ident(INPUT_VIEW)}.{arrival} AS {arrival}"
        #: The same, passing on the rows' arrival watermarks.
        self.query_with_arrival = f"SELECT {columns}{arrival}{body}"
        number = f", {quote_ident(INPUT_VIEW)}.{number} AS {number}"
        #: Each, passing on the input's row numbers too (``BadRows``: a batch a UDF raised on).
        self._numbered = {self.query: f"SELECT {columns}{number}{body}",
                          self.query_with_arrival: f"SELECT {columns}{arrival}{number}{body}"}
        self._con: duckdb.DuckDBPyConnection | None = None
        #: Each query's plan with its Python calls split out (None: evaluated whole by DuckDB).
        self._splits: dict[str, CalcSplit | None] = {}
        self._bad_rows = BadRows(ctx, retractions_listed=False) if config.bad_rows else None
        #: Without a filter, the input column each item passes through (None for a computed one):
        #: only the computed items go through DuckDB (``_computed_query``; None when every item
        #: passes a column: a pruning, renames), and the passed columns, long strings among them,
        #: are taken from the batch by Arrow instead of copied in and out.
        self._passed: list[str | None] | None = None
        #: Per item, (column, µs) when it shifts a timestamp column by a constant (``_shift``,
        #: in Arrow: a cascaded window's time), else None; only with ``_passed``.
        self._shifts: list[tuple[str, int] | None] = []
        self._computed_query: str | None = None
        if not (config.filter or expand or config.bad_rows):
            passed = [_column_reference(sql) for _, sql in projection]
            shifts = [None if name else _shifted_column(sql) for (_, sql), name in zip(projection, passed)]
            # (unnest makes rows: a HOP window's assignment; its items stay in one statement)
            if (any(passed) or any(shifts)) and not any("unnest" in sql.lower() for _, sql in projection):
                self._passed, self._shifts = passed, shifts
                computed = ", ".join(f"{sql} AS {quote_ident(f'c{i}')}" for i, ((_, sql), name, shift)
                                     in enumerate(zip(projection, passed, shifts)) if name is None and shift is None)
                if computed:
                    self._computed_query = f"SELECT {computed} FROM {quote_ident(INPUT_VIEW)}"

    def open(self) -> None:
        if self._con is None:
            self._con = duckdb.connect(":memory:")
            register_functions(self._con)  # Python UDFs of the job (engine.udfs)
            entries = {} if self.config.expand else dict(current().entries)
            self._splits = {query: split(self._con, query, entries, INPUT_VIEW)
                            for query in (self.query, self.query_with_arrival)}
            if any(planned is not None for planned in self._splits.values()):
                self._passed = None  # Python calls are split out over the whole statement

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        self.open()
        self.ctx.count("rows_in", batch.num_rows)
        if batch.num_rows == 0:
            return []
        names = batch.schema.names
        if self._passed is not None and all(c in names for c in [*self._passed, *(s[0] for s in self._shifts if s)] if c):
            table = self._with_passed(batch)
            if table is not None:
                out = conform(table, self.ctx.output_schema, self.ctx.operator_id)
                self.ctx.count("rows_out", batch.num_rows)
                return out
        query = self.query_with_arrival if has_arrival(batch) else self.query
        result = self._bad_rows.evaluate(lambda rows: self._run(query, rows), batch,
                                         lambda rows: self._catch(query, rows)) if self._bad_rows \
            else self._run(query, batch)
        out = conform(result, self.ctx.output_schema, self.ctx.operator_id)
        self.ctx.count("rows_out", sum(b.num_rows for b in out))
        return out

    def _with_passed(self, batch: pa.RecordBatch) -> pa.Table | None:
        """The projection over ``batch`` (no filter): its computed items by one statement (if it
        has any), in order with the columns it passes through, taken from the batch, and those
        it shifts by a constant interval, shifted in Arrow (None if one cannot be: ``_shift``)."""
        names = batch.schema.names
        shifted = {}
        for i, shift in enumerate(self._shifts):
            if shift is not None:
                shifted[i] = _shift(batch.column(names.index(shift[0])), shift[1])
                if shifted[i] is None:
                    return None
        computed = self._query(self._computed_query, batch) if self._computed_query else None
        if computed is not None and computed.num_rows != batch.num_rows:
            raise EngineError(f"a projection gave {computed.num_rows} rows for {batch.num_rows}",
                              operator_id=self.ctx.operator_id)
        columns, index = [], 0
        for i, name in enumerate(self._passed):
            if i in shifted:
                columns.append(pa.chunked_array([shifted[i]]))
            elif name is None:
                columns.append(computed.column(index))
                index += 1
            else:
                columns.append(pa.chunked_array([batch.column(names.index(name))]))
        labels = [f"c{i}" for i in range(len(columns))]
        if has_arrival(batch):
            columns.append(pa.chunked_array([batch.column(names.index(ARRIVAL_WATERMARK))]))
            labels.append(ARRIVAL_WATERMARK)
        return pa.Table.from_arrays(columns, names=labels)

    def _run(self, query: str, batch: pa.RecordBatch) -> pa.Table:
        planned = self._splits.get(query)
        if planned is not None:
            return planned.run(batch, self._query, self.ctx.operator_id)
        return self._query(query, batch)

    def _query(self, query: str, batch: pa.RecordBatch | pa.Table) -> pa.Table:
        self._con.register(INPUT_VIEW, batch)
        try:
            return query_arrow(self._con, query, self.ctx.operator_id)
        finally:
            self._con.unregister(INPUT_VIEW)

    def _catch(self, query: str, rows: pa.RecordBatch) -> tuple[pa.Table, dict]:
        """``query`` over ``rows`` (numbered in ``late_rows.ROW_NUMBER``, passed on) with its UDF
        calls caught row by row (``engine.udfs.catching``): the result and the raising rows' failures."""
        sql, failures = catching(self._con, self._numbered[query], ROW_NUMBER)
        return self._query(sql, rows), failures

    def close(self) -> None:
        if self._bad_rows is not None:
            self._bad_rows.close()
        if self._con is not None:
            self._con.close()
            self._con = None

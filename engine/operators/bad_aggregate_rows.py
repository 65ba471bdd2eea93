"""Bad rows of the window and session aggregates: with 'python.udf.bad-rows.table' (their config's
``bad_rows``), a row a Python aggregate function's ``accumulate`` raises on goes to the job's
bad-rows table and is left out of every aggregate of the query, as if filtered out before it.

1. The operator aggregates a batch (a window aggregate) or a segment of ready rows (a session
   window) as usual, in set-based statements whose ``<accumulate>`` calls fold each group's rows
   at once (``engine.udafs``). When they succeed nothing else runs: no per-row work, no copy.
2. When ``accumulate`` raised the function's own exception (``is_bad_row``), the operator's state
   is as before (a window aggregate's failing statement wrote nothing; a session window rolls
   its transaction back). ``raising_rows`` lists, per Python aggregate, each group's rows with
   their numbers in arrival order (one statement), and ``PythonAggregate.raising_rows`` folds each
   group at once, and where that raises, one row at a time on a copy of the accumulator: the rows
   that raise, with their failures (a row two functions raise on: the first one's).
3. The operator keeps those rows (``BadRows.keep``: the same columns as every bad row) and runs
   step 1 again without them, so COUNT, SUM and every other aggregate are those of the other
   rows. Should that raise again (a function that raises on what its accumulator holds, not on a
   row), the job fails with that error.

A row that raises by its own values is found whatever the batch, the parallelism or a restart, so
the results and the bad rows listed (each once) do not depend on them. ``merge``, ``get_value``
and ``create_accumulator`` fail on accumulators, not rows: they still fail the job.
"""
from __future__ import annotations

from typing import Callable, TypeVar

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.operators.accumulators import PythonAccumulator
from weir.engine.operators.duckdb_sql import query_arrow, quote_ident
from weir.engine.operators.late_rows import ROW_NUMBER
from weir.engine.udafs import PythonAggregate, key_sql
from weir.engine.udfs import UdfError, UdfFailure
from weir.engine.pandas_import import arrow_array

T = TypeVar("T")


def is_bad_row(error: UdfError) -> bool:
    """Whether ``error`` is a Python aggregate's own exception in ``accumulate`` (a row to keep)."""
    failure = error.failure
    return failure is not None and failure.raised is None and failure.keepable and failure.method == "accumulate"


def keep_python(functions: list[PythonAggregate]) -> None:
    """Mark ``functions``: a row their ``accumulate`` raises on can be kept (their errors' hint
    says how)."""
    for function in functions:
        function.keeps_rows = ("accumulate",)


def without_bad_rows(run: Callable[[pa.RecordBatch], T], batch: pa.RecordBatch,
                     find: Callable[[pa.RecordBatch], dict[int, UdfFailure]],
                     keep: Callable[[pa.RecordBatch, list[UdfFailure]], None]) -> T:
    """``run(batch)``; should a Python aggregate's ``accumulate`` raise in it, ``find`` (given the
    batch numbered in ``ROW_NUMBER``) names the rows that raise, ``keep`` gets them and their
    failures, and the result is ``run`` of the other rows (steps 1-3)."""
    try:
        return run(batch)
    except UdfError as error:
        if not is_bad_row(error):
            raise
        first = error
    numbered = batch.append_column(ROW_NUMBER, arrow_array(np.arange(batch.num_rows, dtype=np.int64)))
    failures = find(numbered)
    if not failures:
        raise first
    numbers = pa.array(sorted(failures), pa.int64())
    keep(batch.take(numbers), [failures[n] for n in numbers.to_pylist()])
    return run(batch.filter(pc.invert(pc.is_in(numbered.column(ROW_NUMBER), value_set=numbers))))


def python_arguments(accumulators: list) -> list[tuple[PythonAggregate, str, str | None]]:
    """(function, argument column, filter column or None) of the Python aggregates among a window or
    session aggregate's ``accumulators``, for ``raising_rows``."""
    return [(acc.function, acc.argument_column, acc.filter_column) for acc in accumulators
            if isinstance(acc, PythonAccumulator)]


def raising_rows(con: duckdb.DuckDBPyConnection, rows_sql: str, groups: list[str], keys: list[str],
                 functions: list[tuple[PythonAggregate, str, str | None]], operator_id: str,
                 number: str = ROW_NUMBER) -> dict[int, UdfFailure]:
    """Step 2: the rows of ``rows_sql`` (with their arguments, filters and ``number``) that one of
    ``functions`` (function, argument SQL, filter SQL or None) raises on in accumulate, by number,
    the rows grouped by ``groups`` as the operator groups them (``keys``: the key columns a failure
    names)."""
    failures: dict[int, UdfFailure] = {}
    q = quote_ident(number)
    for function, argument, where in functions:
        rows = f"list({{'v': {argument}, 'q': {q}}} ORDER BY {q})"
        rows += f" FILTER (WHERE {where})" if where else ""
        named = f"{key_sql(keys)} AS keys" if keys else ""
        table = query_arrow(con, f"SELECT {rows} AS rows{named} FROM ({rows_sql}) "
                                 f"GROUP BY {', '.join(groups) or 'ALL'}", operator_id)
        found = function.raising_rows(table.column(0), table.column(1) if keys else None)
        for n, failure in found.items():
            failures.setdefault(n, failure)
    return failures

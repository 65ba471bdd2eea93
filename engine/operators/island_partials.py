"""A batch's partials per island, computed in numpy where numpy gives exactly DuckDB's values.

A SESSION window's batch sessions are the islands of its batch rows sorted by key and time
(``islands``): each island is a run of consecutive rows. Their partials (``accumulators``) are
then reductions over runs, which numpy's ``reduceat`` makes in one pass over the rows, where
DuckDB's GROUP BY hashes every row (Nexmark q11, 65,536 rows into ~3,000 islands: ~7 ms).

Only partials numpy computes with DuckDB's values and types are made here:

- COUNT, of rows or of an argument's non-NULL values, with or without FILTER: BIGINT;
- MIN and MAX of a signed or 8- to 32-bit unsigned integer argument: the argument's type, NULL
  for an island without a value.

Any other partial (SUM, whose DuckDB type is HUGEINT; floats, with their NaN and -0.0; Python
aggregates) leaves the batch to SQL: ``island_partials`` returns None.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.operators.accumulators import Accumulator
from weir.engine.pandas_import import arrow_array, numpy_values


def island_partials(rows: pa.Table, firsts: np.ndarray, sizes: np.ndarray,
                    accumulators: list) -> list[pa.Array] | None:
    """Every accumulator column's partial (in the order of their ``columns``) per island of
    ``rows``, the islands being the runs of rows starting at ``firsts`` (ascending, the first 0)
    of ``sizes`` rows; None when one of them is not made here (module docstring)."""
    partials = []
    for acc in accumulators:
        if not isinstance(acc, Accumulator):
            return None
        counted = _counted(rows, acc.argument_column, acc.filter_column)
        counts = sizes if counted is None else np.add.reduceat(counted.astype(np.int64), firsts)
        for column in acc.columns:
            kind = column.partial.kind
            if kind == "count":
                partials.append(arrow_array(counts))
            elif kind in ("min", "max") and acc.argument_column is not None:
                extreme = _extreme(rows.column(acc.argument_column).combine_chunks(), counted, counts, firsts, kind)
                if extreme is None:
                    return None
                partials.append(extreme)
            else:
                return None
    return partials


def _counted(rows: pa.Table, argument: str | None, condition: str | None) -> np.ndarray | None:
    """Per row, whether it counts for the aggregate (its argument not NULL, its FILTER true);
    None where every row does."""
    counted = None
    if argument is not None:
        values = rows.column(argument)
        if values.null_count:
            counted = numpy_values(pc.is_valid(values))
    if condition is not None:
        holds = numpy_values(pc.fill_null(rows.column(condition), False))
        counted = holds if counted is None else counted & holds
    return counted


def _extreme(values: pa.Array, counted: np.ndarray | None, counts: np.ndarray, firsts: np.ndarray,
             kind: str) -> pa.Array | None:
    """MIN or MAX (``kind``) of the counted ``values`` per island, NULL where it has none; None for
    a type not made here."""
    arrow_type = values.type
    if not (pa.types.is_signed_integer(arrow_type)
            or pa.types.is_unsigned_integer(arrow_type) and arrow_type.bit_width <= 32):
        return None
    if values.null_count:
        values = pc.fill_null(values, 0)
    numbers = numpy_values(values)
    bounds = np.iinfo(numbers.dtype)
    ignored = bounds.max if kind == "min" else bounds.min
    if counted is not None:
        numbers = np.where(counted, numbers, ignored)
    reduce = np.minimum if kind == "min" else np.maximum
    return arrow_array(reduce.reduceat(numbers, firsts), arrow_type, mask=counts == 0)

"""An equi-join of two Arrow tables in Arrow (Acero's hash join), where it gives SQL's answer.

A window join's firing joins rows already in Arrow (``engine.operators.held_rows``); DuckDB
takes them in as a view, but its hash join of a Nexmark q7 window (92K bids against the
window's one maximum) took about ten times Acero's. ``equi_join`` joins in Arrow when that is
exact and bounded, and answers None for the caller's SQL otherwise:

1. every key has the same type on both sides, one whose equality is plain (integers,
   timestamps, dates, strings, booleans, decimals: never floats, whose NaN DuckDB equates);
   NULL keys match nothing in Acero, as in SQL;
2. at most ``max_pairs`` left rows × right rows, so that no join can grow past that many
   rows in memory (the caller's SQL streams a larger one out in bounded batches);
3. Acero supports every column's type (else it raises, and the answer is None).

Single-threaded: the row order depends on the inputs' alone. The plan is built with
``pyarrow._acero`` itself: ``Table.join`` goes through ``pyarrow.acero``, whose import of
``pyarrow.dataset`` imports pandas (0.8 s on a loaded machine, once per process). It is a
private module: a pyarrow without it leaves every join to the caller's SQL.
"""
from __future__ import annotations

import pyarrow as pa

try:
    from pyarrow._acero import Declaration, HashJoinNodeOptions, TableSourceNodeOptions
except ImportError:  # pragma: no cover - pyarrow moved its private module: DuckDB joins
    Declaration = None

#: Acero's name for each SQL join type.
ACERO_JOIN_TYPES = {"inner": "inner", "left": "left outer", "right": "right outer", "full": "full outer",
                    "semi": "left semi", "anti": "left anti"}


def _plain_equality(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_boolean(t) or pa.types.is_decimal(t))


def equi_join(left: pa.Table, right: pa.Table, left_keys: list[str], right_keys: list[str],
              join_type: str, max_pairs: int) -> pa.Table | None:
    """``left <join_type> JOIN right ON left_keys = right_keys``: the left columns, then the
    right ones (NULLs for a missing outer side; SEMI and ANTI: the left columns only). Column
    names must differ between the sides. None where Arrow cannot give exactly that."""
    if Declaration is None or left.num_rows * right.num_rows > max_pairs:
        return None
    for lk, rk in zip(left_keys, right_keys):
        t = left.schema.field(lk).type
        if t != right.schema.field(rk).type or not _plain_equality(t):
            return None
    plan = Declaration("hashjoin", HashJoinNodeOptions(ACERO_JOIN_TYPES[join_type], left_keys, right_keys),
                       inputs=[Declaration("table_source", TableSourceNodeOptions(left)),
                               Declaration("table_source", TableSourceNodeOptions(right))])
    try:
        joined = plan.to_table(use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    names = left.schema.names + ([] if join_type in ("semi", "anti") else right.schema.names)
    return joined.select(names)

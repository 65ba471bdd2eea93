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

An inner join's condition (Flink's non-equi join condition: Nexmark q5's ``"num" >= "maxn"``)
filters the joined rows in Arrow where it is one comparison of two columns of one plain type
(``ColumnComparison``: as SQL, a NULL on either side keeps no row); any other condition is the
caller's SQL's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

try:
    from pyarrow._acero import Declaration, HashJoinNodeOptions, TableSourceNodeOptions
except ImportError:  # pragma: no cover - pyarrow moved its private module: DuckDB joins
    Declaration = None

#: Acero's name for each SQL join type.
ACERO_JOIN_TYPES = {"inner": "inner", "left": "left outer", "right": "right outer", "full": "full outer",
                    "semi": "left semi", "anti": "left anti"}


#: The pyarrow kernel of each SQL comparison operator.
COMPARISONS = {"=": pc.equal, "<>": pc.not_equal, "!=": pc.not_equal, "<": pc.less, "<=": pc.less_equal,
               ">": pc.greater, ">=": pc.greater_equal}
_QUOTED = r'"((?:[^"]|"")+)"'
_COMPARISON = re.compile(rf"{_QUOTED} (=|<>|!=|<=|>=|<|>) {_QUOTED}")


@dataclass(frozen=True)
class ColumnComparison:
    """A condition that compares two columns, ``"left" <op> "right"`` (quoted names)."""

    left: str
    operator: str
    right: str

    @classmethod
    def parse(cls, condition: str | None) -> "ColumnComparison | None":
        """The comparison ``condition`` is (as the planner writes it), or None for any other SQL."""
        match = _COMPARISON.fullmatch((condition or "").strip())
        if match is None:
            return None
        left, operator, right = match.groups()
        return cls(left.replace('""', '"'), operator, right.replace('""', '"'))

    def mask(self, table: pa.Table, names: dict[str, str]) -> pa.ChunkedArray | None:
        """Whether each row of ``table`` satisfies the comparison (NULL: it does not), its columns
        found under ``names`` (condition name -> column of ``table``); None where Arrow would not
        give SQL's answer: either column missing, or the two of different or unplain types
        (DuckDB casts across types, and orders NaN above every number)."""
        left, right = names.get(self.left), names.get(self.right)
        if left is None or right is None:
            return None
        a, b = table.column(left), table.column(right)
        if a.type != b.type or not _plain_equality(a.type):
            return None
        return COMPARISONS[self.operator](a, b)


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

"""Per-window accumulator logic: how each aggregate is kept as partials and merged.

Each batch contributes *partial* aggregates per (key, slice); partials of one
window combine when it fires (and when state is compacted):

| function | partial columns              | merge       | final                          |
|----------|------------------------------|-------------|--------------------------------|
| count    | COUNT(arg or *)              | SUM→BIGINT  | the merged count               |
| sum      | SUM(arg)                     | SUM         | the merged sum (NULL if no values) |
| min, max | MIN(arg), MAX(arg)           | MIN, MAX    | the merged value               |
| avg      | SUM(arg), COUNT(arg)         | SUM, SUM    | sum / count in the result type, NULL if count = 0 |

A DISTINCT count, sum or avg cannot be merged from partials: it keeps the
distinct values per (key, slice) in a table of its own and aggregates them
when the window fires. MIN/MAX DISTINCT equal MIN/MAX and use partials.

Result types are Flink's, given by the planner as ``result_type`` (DuckDB type
SQL): SUM and AVG of an integer column are the column's type (AVG truncated
toward zero, as Java's integer division), of DECIMAL(p, s) SUM is
DECIMAL(38, s) and AVG DECIMAL(38, max(6, s)) rounded half up, of FLOAT and
DOUBLE the same type. Partial sums are DuckDB's (HUGEINT for integers), so
they never wrap; a SUM whose value leaves its result type's range fails the
job with a message naming the aggregate and the fix (``overflow_sql``), where
Flink would wrap around silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weir.engine.errors import EngineError
from weir.engine.operators.duckdb_sql import RAISED

AGGREGATE_FUNCTIONS = ("count", "sum", "min", "max", "avg")

#: The range of each integer result type, for SUM's overflow check.
INTEGER_RANGES = {"TINYINT": (-2**7, 2**7 - 1), "SMALLINT": (-2**15, 2**15 - 1),
                  "INTEGER": (-2**31, 2**31 - 1), "BIGINT": (-2**63, 2**63 - 1)}
#: Separates message and hint in an ``error()`` message (``duckdb_sql`` splits them).
HINT_SEPARATOR = " | hint: "


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate of the config: ``function([DISTINCT] argument) FILTER (WHERE filter) AS name``."""

    name: str
    function: str
    argument: str | None = None
    distinct: bool = False
    filter: str | None = None
    #: Flink's result type as DuckDB type SQL (SUM, AVG); None: DuckDB's type.
    result_type: str | None = None
    #: The call as the user wrote it, for error messages.
    label: str | None = None

    @classmethod
    def from_config(cls, spec: dict[str, Any], operator_id: str) -> "AggregateCall":
        function = str(spec.get("function", "")).lower()
        if function not in AGGREGATE_FUNCTIONS:
            raise EngineError(
                f"aggregate {spec.get('name')!r}: unknown function {spec.get('function')!r}",
                hint=f"supported: {', '.join(AGGREGATE_FUNCTIONS)}",
                operator_id=operator_id,
            )
        call = cls(
            name=spec["name"],
            function=function,
            argument=spec.get("argument"),
            distinct=bool(spec.get("distinct", False)),
            filter=spec.get("filter"),
            result_type=spec.get("result_type"),
            label=spec.get("label"),
        )
        if call.argument is None and function != "count":
            raise EngineError(
                f"aggregate {call.name!r}: {function} needs an argument", operator_id=operator_id
            )
        if call.argument is None and call.distinct:
            raise EngineError(
                f"aggregate {call.name!r}: COUNT(DISTINCT *) is not valid; name a column",
                operator_id=operator_id,
            )
        return call

    @property
    def keeps_distinct_values(self) -> bool:
        return self.distinct and self.function in ("count", "sum", "avg")

    def sum_sql(self, total: str) -> str:
        """SUM's value in its result type from the exact (unwrapped) sum ``total``."""
        kind = self.result_type
        if kind is None:
            return total
        if kind not in INTEGER_RANGES:
            return f"CAST({total} AS {kind})"
        low, high = INTEGER_RANGES[kind]
        return (f"CASE WHEN {total} IS NULL THEN NULL WHEN {total} BETWEEN {low} AND {high} "
                f"THEN CAST({total} AS {kind}) ELSE {self.overflow_sql(kind)} END")

    def overflow_sql(self, kind: str) -> str:
        label = self.label or f"SUM({self.argument})"
        wider = f"SUM(CAST({self.argument} AS DECIMAL(38, 0)))" if kind == "BIGINT" else \
            f"SUM(CAST({self.argument} AS BIGINT))"
        message = (f"{label} overflows {kind}, its result type (SUM of a {kind} column is a {kind}, as in "
                   f"Flink; weir fails rather than wrap around){HINT_SEPARATOR}cast the argument wider: {wider}")
        return f"error({sql_string(RAISED + message)})"

    def avg_sql(self, total: str, count: str) -> str:
        """AVG's value in its result type from the sum and count of its values (NULL if none)."""
        kind = self.result_type or "DOUBLE"
        if kind in INTEGER_RANGES:  # Java's integer division: truncated toward zero
            # Both sides HUGEINT: restored state holds sums and counts as DECIMAL(38, 0) (how a
            # HUGEINT column comes back from a snapshot), and `//` with a DECIMAL divides exactly.
            value = f"CAST(CAST({total} AS HUGEINT) // CAST({count} AS HUGEINT) AS {kind})"
        elif kind.startswith("DECIMAL"):
            scale = int(kind.rstrip(")").split(",")[1])
            units = f"CAST(({total}) * {10 ** scale} AS HUGEINT)"
            n = f"CAST({count} AS HUGEINT)"
            rounded = f"sign({units}) * ((abs({units}) * 2 + {n}) // (2 * {n}))"  # half up
            value = (f"CAST(CAST({rounded} AS DECIMAL(38, 0)) * CAST('{10 ** -scale:.{scale}f}' "
                     f"AS DECIMAL({scale + 1}, {scale})) AS {kind})")
        else:
            value = f"CAST(CAST({total} AS DOUBLE) / {count} AS {kind})"
        return f"CASE WHEN {count} = 0 THEN NULL ELSE {value} END"


def sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class PartialColumn:
    """A column of ``window_accumulators``: its per-batch aggregate and how partials merge."""

    name: str
    partial_sql: str
    merge_template: str  # "{}" is replaced by the column

    def merge_sql(self, column_sql: str) -> str:
        return self.merge_template.format(column_sql)


_MERGE_COUNT = "CAST(SUM({}) AS BIGINT)"


class Accumulator:
    """A non-distinct aggregate kept as mergeable partials.

    ``argument_column`` / ``filter_column`` name the prepared-row columns
    holding the aggregate's argument and filter for the current batch.
    """

    def __init__(self, call: AggregateCall, index: int):
        self.call = call
        self.argument_column = f"__a{index}" if call.argument is not None else None
        self.filter_column = f"__f{index}" if call.filter is not None else None
        prefix = f"__p{index}"
        self.columns = self._partial_columns(prefix)

    def _aggregate(self, function: str) -> str:
        arg = self.argument_column or "*"
        sql = f"{function}({arg})"
        if self.filter_column:
            sql += f" FILTER (WHERE {self.filter_column})"
        return sql

    def _partial_columns(self, prefix: str) -> list[PartialColumn]:
        f = self.call.function
        if f == "count":
            return [PartialColumn(f"{prefix}_count", self._aggregate("COUNT"), _MERGE_COUNT)]
        if f == "sum":
            return [PartialColumn(f"{prefix}_sum", self._aggregate("SUM"), "SUM({})")]
        if f in ("min", "max"):
            fn = f.upper()
            return [PartialColumn(f"{prefix}_{f}", self._aggregate(fn), fn + "({})")]
        # avg: sum and count, divided when the window fires
        return [
            PartialColumn(f"{prefix}_sum", self._aggregate("SUM"), "SUM({})"),
            PartialColumn(f"{prefix}_count", self._aggregate("COUNT"), _MERGE_COUNT),
        ]

    def final_sql(self, merged: list[str]) -> str:
        """The aggregate's value from its merged partials (same order as ``columns``)."""
        if self.call.function == "avg":
            return self.call.avg_sql(*merged)
        if self.call.function == "sum":
            return self.call.sum_sql(merged[0])
        return merged[0]


class DistinctAccumulator:
    """DISTINCT count/sum/avg: the distinct non-NULL values per (key, slice) are kept.

    Aggregates with the same argument and filter share one value table.
    """

    def __init__(self, argument: str, filter: str | None, index: int):
        self.argument = argument
        self.filter = filter
        self.table = f"distinct_values_{index}"
        self.argument_column = f"__d{index}"
        self.filter_column = f"__df{index}" if filter is not None else None
        self.calls: list[AggregateCall] = []

    def final_sql(self, call: AggregateCall, value_sql: str = "value") -> str:
        if call.function == "avg":
            return call.avg_sql(f"SUM(DISTINCT {value_sql})", f"COUNT(DISTINCT {value_sql})")
        if call.function == "sum":
            return call.sum_sql(f"SUM(DISTINCT {value_sql})")
        return f"{call.function.upper()}(DISTINCT {value_sql})"

    @staticmethod
    def empty_value(call: AggregateCall) -> str:
        """The value when the window has rows but none reached this table."""
        return "0" if call.function == "count" else "NULL"


def argument_columns(accumulators: list[Accumulator], distincts: list[DistinctAccumulator]) -> list[str]:
    """``(SQL) AS column`` for every aggregate argument and FILTER condition over input rows,
    as the window and session aggregates compute them before aggregating a batch."""
    columns = []
    for acc in accumulators:
        if acc.argument_column:
            columns.append(f"({acc.call.argument}) AS {acc.argument_column}")
        if acc.filter_column:
            columns.append(f"({acc.call.filter}) AS {acc.filter_column}")
    for d in distincts:
        columns.append(f"({d.argument}) AS {d.argument_column}")
        if d.filter_column:
            columns.append(f"({d.filter}) AS {d.filter_column}")
    return columns

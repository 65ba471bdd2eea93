"""Per-window accumulator logic: how each aggregate is kept as partials and merged.

Each batch contributes *partial* aggregates per (key, slice); partials of one
window combine when it fires (and when state is compacted):

| function | partial columns              | merge       | final                          |
|----------|------------------------------|-------------|--------------------------------|
| count    | COUNT(arg or *)              | SUM→BIGINT  | the merged count               |
| sum      | SUM(arg)                     | SUM         | the merged sum (NULL if no values) |
| min, max | MIN(arg), MAX(arg)           | MIN, MAX    | the merged value               |
| avg      | SUM(arg), COUNT(arg)         | SUM, SUM    | sum / count as DOUBLE, NULL if count = 0 |

A DISTINCT count, sum or avg cannot be merged from partials: it keeps the
distinct values per (key, slice) in a table of its own and aggregates them
when the window fires. MIN/MAX DISTINCT equal MIN/MAX and use partials.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import EngineError

AGGREGATE_FUNCTIONS = ("count", "sum", "min", "max", "avg")


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate of the config: ``function([DISTINCT] argument) FILTER (WHERE filter) AS name``."""

    name: str
    function: str
    argument: str | None = None
    distinct: bool = False
    filter: str | None = None

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
            total, count = merged
            return f"CASE WHEN {count} = 0 THEN NULL ELSE CAST({total} AS DOUBLE) / {count} END"
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

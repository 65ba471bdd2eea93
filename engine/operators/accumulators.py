"""The aggregate functions, each defined once: its accumulator, how partials merge, its result.

Every aggregate is kept as *partials* — accumulator columns of four kinds
(``PARTIALS``) — that merge; the window, session, group and OVER aggregates
all take the partials and the result SQL from here (``FUNCTIONS``):

| partial | of raw values (a batch) | of one row       | of signed rows (+1/-1)    | merge of partials  | two partials   |
|---------|-------------------------|------------------|---------------------------|--------------------|----------------|
| count   | COUNT(arg or *)         | 1, 0 if arg NULL | SUM(sign)                 | SUM -> BIGINT      | a + b          |
| sum     | SUM(arg)                | arg              | SUM(arg, negated if -1)   | SUM                | a + b          |
| min/max | MIN(arg), MAX(arg)      | arg              | MIN, MAX (+1 rows only)   | MIN, MAX           | LEAST, GREATEST|

| function | partials   | signed partials (group aggregate) | result                                  |
|----------|------------|-----------------------------------|-----------------------------------------|
| count    | count      | count                             | the merged count                        |
| sum      | sum        | count, sum                        | the merged sum (NULL if no values)      |
| min, max | min, max   | min, max (append-only input)      | the merged value                        |
| avg      | sum, count | count, sum                        | sum / count in the result type, NULL if count = 0 |

The window and session aggregates aggregate a batch's raw values into
partials per (key, slice) and merge them when a window fires; the OVER
aggregate keeps one row's partials per row and merges a frame's with window
functions; the group aggregate adds signed partials of a changelog
(``signed_partials``, ``Partial.of_signed``), so its SUM also keeps a count (a
sum back to 0 after retractions is NULL when no value is left), and computes
MIN, MAX and DISTINCT aggregates of a retracting input from a multiset of
values with the partials' ``of_values``.

A Python aggregate function (``engine.udafs``) is one partial of its own kind, a pickled
accumulator (``PythonAccumulator``), made, merged and read by the function's methods through
DuckDB functions of the operator's state connection.

A DISTINCT count, sum or avg cannot be merged from partials: it keeps the
distinct values per (key, slice) in a table of its own and aggregates them
when the window fires. MIN/MAX DISTINCT equal MIN/MAX and use partials.

Result types are Flink's (``result_type``, DuckDB type SQL, which the planner
puts in the config): SUM and AVG of an integer column are the column's type
(AVG truncated toward zero, as Java's integer division), of DECIMAL(p, s) SUM
is DECIMAL(38, s) and AVG DECIMAL(38, max(6, s)) rounded half up, of FLOAT and
DOUBLE the same type (``AggregateFunction.result_type``); COUNT is BIGINT. Partial sums are DuckDB's (HUGEINT for
integers), so they never wrap; a SUM whose value leaves its result type's
range fails the job with a message naming the aggregate and the fix
(``overflow_sql``), where Flink would wrap around silently.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow as pa

from weir.engine.errors import EngineError
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.operators.duckdb_sql import RAISED
from weir.engine.udafs import PythonAggregate, PythonAggregateSpec, key_sql


#: The range of each integer result type, for SUM's overflow check.
INTEGER_RANGES = {"TINYINT": (-2**7, 2**7 - 1), "SMALLINT": (-2**15, 2**15 - 1),
                  "INTEGER": (-2**31, 2**31 - 1), "BIGINT": (-2**63, 2**63 - 1)}
#: Separates message and hint in an ``error()`` message (``duckdb_sql`` splits them).
HINT_SEPARATOR = " | hint: "


@dataclass(frozen=True)
class Partial:
    """A kind of accumulator column: how raw values, one row and partials become it."""

    kind: str
    aggregate: str  # the aggregate over raw values: COUNT, SUM, MIN, MAX
    merge_template: str  # partials merged by an aggregate ({column}; {over}: " OVER w" as a window function)
    combine: str  # two partials combined: "sum", "min" or "max"
    #: The partial of signed rows ({argument}, {sign}: +1 adds a row, -1 retracts it). MIN and MAX
    #: cannot retract: theirs is of rows that only add (an append-only input).
    signed_template: str = ""
    #: The partial of no rows, where the SQL aggregate of none is NULL: COUNT's 0.
    of_nothing: str | None = None

    def of_values(self, argument: str | None, condition: str | None = None, distinct: bool = False) -> str:
        """The partial of a set of rows, from the argument's values (``*``: COUNT(*))."""
        sql = f"{self.aggregate}({'DISTINCT ' if distinct else ''}{argument or '*'})"
        return sql + (f" FILTER (WHERE {condition})" if condition else "")

    def of_signed(self, argument: str | None, sign: str, condition: str | None = None) -> str:
        """The partial of a set of signed rows (a changelog's: ``sign`` -1 retracts), to add to a
        partial kept so far (``combine``)."""
        sql = self.signed_template.format(argument=argument, sign=sign)
        return sql + (f" FILTER (WHERE {condition})" if condition else "")

    def or_nothing(self, sql: str) -> str:
        """``sql`` (a partial that may be NULL: no rows) as the partial of no rows is."""
        return f"COALESCE({sql}, {self.of_nothing})" if self.of_nothing is not None else sql

    def of_row(self, argument: str | None) -> str:
        """The partial of one row."""
        if self.kind != "count":
            return argument
        return f"CAST(CASE WHEN {argument} IS NULL THEN 0 ELSE 1 END AS BIGINT)" if argument else "CAST(1 AS BIGINT)"

    def merge_sql(self, column: str, over: str = "") -> str:
        return self.merge_template.format(column=column, over=over)


PARTIALS = {
    "count": Partial("count", "COUNT", "CAST(SUM({column}){over} AS BIGINT)", "sum", "SUM({sign})", "0"),
    "sum": Partial("sum", "SUM", "SUM({column}){over}", "sum",
                   "SUM(CASE WHEN {sign} > 0 THEN {argument} ELSE -{argument} END)"),
    "min": Partial("min", "MIN", "MIN({column}){over}", "min", "MIN({argument})"),
    "max": Partial("max", "MAX", "MAX({column}){over}", "max", "MAX({argument})"),
}


@dataclass(frozen=True)
class AggregateFunction:
    """One aggregate function: its partials (in order) and its result from them."""

    name: str
    partial_kinds: tuple[str, ...]

    def partials(self) -> tuple[Partial, ...]:
        return tuple(PARTIALS[k] for k in self.partial_kinds)

    def signed_partials(self) -> tuple[Partial, ...]:
        """The partials kept of signed rows (``Partial.of_signed``, the group aggregate's state, in
        this order): a count of the values besides a SUM's, so that a sum whose values were all
        retracted is NULL again (``result_sql``); MIN and MAX only of rows that never retract."""
        kinds = ("count", "sum") if "sum" in self.partial_kinds else self.partial_kinds
        return tuple(PARTIALS[k] for k in kinds)

    def result_sql(self, call: "AggregateCall", merged: Mapping[str, str]) -> str:
        """The result in its result type from the merged partials (partial kind -> SQL)."""
        if self.name == "count":
            return f"CAST({merged['count']} AS BIGINT)"
        if self.name == "sum":
            total = merged["sum"]
            if "count" in merged:  # retracting: a sum of no values left is NULL, not 0
                total = f"CASE WHEN {merged['count']} > 0 THEN {total} END"
            return call.sum_sql(total)
        if self.name == "avg":
            return call.avg_sql(merged["sum"], f"COALESCE({merged['count']}, 0)")
        return merged[self.name]

    def result_type(self, argument: pa.DataType | None) -> str | None:
        """Flink's result type as DuckDB type SQL (``LogicalTypeMerging.findSumAggType``,
        ``findAvgAggType``), None where DuckDB's is Flink's (COUNT: BIGINT; MIN, MAX: the
        argument's) or the argument is not a Flink numeric type: an integer or floating type stays itself (AVG truncates), DECIMAL(p, s)
        becomes DECIMAL(38, s) for SUM and DECIMAL(38, max(6, s)) for AVG."""
        if self.name not in ("sum", "avg") or argument is None:
            return None
        if pa.types.is_decimal(argument):
            return f"DECIMAL(38, {argument.scale if self.name == 'sum' else max(6, argument.scale)})"
        return NUMERIC_TYPES.get(argument)


FUNCTIONS = {f.name: f for f in (AggregateFunction("count", ("count",)), AggregateFunction("sum", ("sum",)),
                                 AggregateFunction("min", ("min",)), AggregateFunction("max", ("max",)),
                                 AggregateFunction("avg", ("sum", "count")))}
AGGREGATE_FUNCTIONS = tuple(FUNCTIONS)
#: The DuckDB name of each Arrow numeric type whose SUM and AVG keep it, as in Flink.
NUMERIC_TYPES = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INTEGER",
                 pa.int64(): "BIGINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE"}


@dataclass(frozen=True)
class AggregateCall(OperatorConfig):
    """One aggregate of the config: ``function([DISTINCT] argument) FILTER (WHERE filter) AS name``."""

    name: str
    function: str
    argument: str | None = None
    distinct: bool = False
    filter: str | None = None
    #: Flink's result type as DuckDB type SQL (SUM, AVG); None: DuckDB's type.
    result_type: str | None = optional()
    #: The call as the user wrote it, for error messages.
    label: str | None = optional()
    #: A Python aggregate function (``engine.udafs``); ``function`` is then its SQL name.
    python: PythonAggregateSpec | None = optional()

    @classmethod
    def from_config(cls, spec: "AggregateCall | dict[str, Any]", operator_id: str) -> "AggregateCall":
        """``spec`` checked (a known function, an argument where one is needed), naming the operator."""
        if isinstance(spec, AggregateCall):
            spec = spec.to_json()
        function = str(spec.get("function", "")).lower()
        if function not in AGGREGATE_FUNCTIONS and spec.get("python") is None:
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
            python=spec.get("python"),
        )
        if call.python is not None:
            if call.distinct:
                raise EngineError(f"aggregate {call.name!r}: DISTINCT is not supported for the Python aggregate "
                                  f"function {function}", operator_id=operator_id)
            return call
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
    def definition(self) -> AggregateFunction:
        return FUNCTIONS[self.function]

    def result_sql(self, merged: Mapping[str, str]) -> str:
        return self.definition.result_sql(self, merged)

    @property
    def keeps_distinct_values(self) -> bool:
        return self.distinct and self.function in ("count", "sum", "avg")

    def requires_python(self, operator_id: str, *, merge: bool = False) -> PythonAggregate:
        """The Python aggregate function this call is, imported; ``merge``: the operator merges
        partial accumulators, which the function must define."""
        function = PythonAggregate(self.python, operator_id)
        if merge and not self.python.merges:
            raise EngineError(f"the Python aggregate function {self.python.name} has no merge method, which "
                              "window aggregates need", hint=MERGE_HINT, operator_id=operator_id)
        return function

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
    partial: Partial

    def merge_sql(self, column_sql: str) -> str:
        return self.partial.merge_sql(column_sql)


class Accumulator:
    """A non-distinct aggregate kept as mergeable partials (the window and session aggregates).

    ``argument_column`` / ``filter_column`` name the prepared-row columns
    holding the aggregate's argument and filter for the current batch.
    """

    def __init__(self, call: AggregateCall, index: int):
        self.call = call
        self.argument_column = f"__a{index}" if call.argument is not None else None
        self.filter_column = f"__f{index}" if call.filter is not None else None
        prefix = f"__p{index}"
        self.columns = [PartialColumn(f"{prefix}_{p.kind}", p.of_values(self.argument_column, self.filter_column), p)
                        for p in call.definition.partials()]

    def final_sql(self, merged: list[str]) -> str:
        """The aggregate's value from its merged partials (same order as ``columns``)."""
        return self.call.result_sql({c.partial.kind: sql for c, sql in zip(self.columns, merged)})


#: How to give a UDAF the merge a window aggregate needs.
MERGE_HINT = ("define merge(self, acc, others), which adds the accumulators of the list others into acc: "
              "windows merge the partial accumulators of their slices, sessions and subtasks")


class PythonAccumulator:
    """A Python aggregate function (``engine.udafs``) kept as one pickled accumulator per (key,
    slice) and batch, in the same places as an ``Accumulator``'s partials: a batch's rows of a
    group become an accumulator in ``<accumulate>(list(argument))``, partials merge in
    ``<merge>(list(column))`` and the result is ``<value>(merged)``."""

    def __init__(self, call: AggregateCall, index: int, function: PythonAggregate, keys: list[str] = ()):
        self.call = call
        self.function = function
        self.argument_column = f"__a{index}"
        self.filter_column = f"__f{index}" if call.filter is not None else None
        partial = Partial("python", "", f"{function.merge_fn}(list({{column}}))", "python")
        rows = f"list({self.argument_column})" + (f" FILTER (WHERE {self.filter_column})" if self.filter_column else "")
        # the group's key columns last: a failing row's error names its key (udafs.key_sql)
        self.columns = [PartialColumn(f"__p{index}_python", f"{function.accumulate_fn}({rows}{key_sql(keys)})",
                                      partial)]

    def final_sql(self, merged: list[str]) -> str:
        return f"{self.function.value_fn}({merged[0]})"


def accumulator(call: AggregateCall, index: int, operator_id: str,
                keys: list[str] = ()) -> "Accumulator | PythonAccumulator":
    """The window and session aggregates' accumulator of a non-distinct ``call`` (``keys``: the
    key columns its partials are grouped by)."""
    if call.python is not None:
        return PythonAccumulator(call, index, call.requires_python(operator_id, merge=True), keys)
    return Accumulator(call, index)


def register_python(con, accumulators) -> None:
    """Register the DuckDB functions of the Python aggregate functions among ``accumulators``."""
    for acc in accumulators:
        if isinstance(acc, PythonAccumulator):
            acc.function.register(con)


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
        return call.result_sql({p.kind: p.of_values(value_sql, distinct=True) for p in call.definition.partials()})

    @staticmethod
    def empty_value(call: AggregateCall) -> str:
        """The value when the window has rows but none reached this table."""
        return "0" if call.function == "count" else "NULL"


def argument_columns(accumulators: list[Accumulator], distincts: list[DistinctAccumulator]) -> list[str]:
    """``(SQL) AS column`` for every aggregate argument and FILTER condition over input rows,
    as the window and session aggregates compute them before aggregating a batch."""
    return [f"({sql}) AS {column}" for column, sql in argument_sources(accumulators, distincts)]


def argument_sources(accumulators: list[Accumulator],
                     distincts: list[DistinctAccumulator]) -> list[tuple[str, str]]:
    """(column, SQL over input rows) of every aggregate argument and FILTER condition, in the
    order of ``argument_columns``."""
    sources = []
    for acc in accumulators:
        if acc.argument_column:
            sources.append((acc.argument_column, acc.call.argument))
        if acc.filter_column:
            sources.append((acc.filter_column, acc.call.filter))
    for d in distincts:
        sources.append((d.argument_column, d.argument))
        if d.filter_column:
            sources.append((d.filter_column, d.filter))
    return sources

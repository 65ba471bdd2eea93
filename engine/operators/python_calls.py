"""Python UDF calls split out of a calc's statement and evaluated over whole batches (Flink's
PythonCalcSplitRule): DuckDB calls a UDF once per 2,048-row vector (about 0.3 ms each), and as
often as the statement names it; split out, a call is one Python call over the whole batch,
made once however often the statement repeats it.

``split(con, query, entries)`` (at the calc's open) reads the calc's SELECT in DuckDB's own parse
tree (``engine.duckdb_tree``) and plans it:

1. A call of a UDF of ``entries`` is *hoisted* when SQL evaluates it on every row that reaches the
   expression holding it: at the top of a projection item or of a WHERE conjunct, or nested only in
   expressions that evaluate all their operands (operators such as ``+`` and ``%``, scalar
   functions that are not macros, comparisons, CAST, NOT, IS [NOT] NULL, another hoisted call's
   arguments). A call under CASE, COALESCE, IF, IFNULL, NULLIF, TRY, IN, BETWEEN, an AND or OR
   below the top of WHERE, a lambda or a subquery stays in the statement, evaluated by DuckDB on
   the rows it chooses, as before; so does a call whose arguments hold a lambda or a subquery.
2. Each hoisted call becomes a column ``__weir_call_<n>`` that the expression refers to instead.
   Calls of a deterministic function with equal arguments are one column; each call of a
   non-deterministic one is a column of its own (one call per row per call site, as in DuckDB).
3. The WHERE conjuncts are taken in the order written, each one's new calls a *step* evaluated
   over the rows that passed the conjuncts before it (SQL's short circuit: no call on a row an
   earlier conjunct rejected); the projection's calls are the last step, over the rows that passed
   every conjunct. A step's calls whose arguments use a column of another call of the same step
   come in a later *round* of it.

``CalcSplit.run(batch, query, operator_id)`` evaluates a batch:

4. Per round, one DuckDB statement keeps the rows that pass the step's conjuncts and computes the
   calls' arguments (``SELECT *, <argument> AS __weir_arg_<n> FROM calc_input WHERE ...``). It is
   skipped when there is nothing to keep out and every argument is an input column of a type DuckDB
   would hand the function unchanged (``_AS_IS``; cast to the declared input type if any).
5. Each call calls the function's registered callback (``engine.udfs``: the one DuckDB calls, so
   NULLs, result types and failure records are the same) once over the round's whole columns and
   the result is appended as its column; the arguments' columns are dropped.
6. Last, the calc's statement with the hoisted calls replaced by their columns (and WHERE by the
   conjuncts no step applied). A raising call fails the batch with the error DuckDB's would have
   given (``UdfFailure.engine_error``: the function, the first failing row's values, the traceback).
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import duckdb
import pyarrow as pa

from weir.engine import duckdb_tree
from weir.engine.udfs import arrow_type, record_failure, take_failure

CALL_PREFIX = "__weir_call_"
ARGUMENT_PREFIX = "__weir_arg_"

#: Operators (DuckDB's OPERATOR nodes) that evaluate their operands on every row.
_STRICT_OPERATORS = frozenset({"OPERATOR_NOT", "OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"})
#: What a hoisted call's arguments may hold: DuckDB evaluates them in a statement of their own.
_ARGUMENT_CLASSES = frozenset({"COLUMN_REF", "CONSTANT", "FUNCTION", "CAST", "TYPE", "COMPARISON", "OPERATOR",
                               "CASE", "CONJUNCTION", "BETWEEN"})


def _as_is(t: pa.DataType) -> bool:
    """Whether DuckDB hands a UDF an input column of Arrow type ``t`` as the same Arrow type."""
    return (pa.types.is_integer(t) or t in (pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.date32())
            or (pa.types.is_timestamp(t) and t.unit == "us" and t.tz is None))


@functools.lru_cache(maxsize=1)
def _scalar_functions() -> frozenset:
    """DuckDB's built-in scalar functions that are not macros (a macro such as IF or NULLIF may
    evaluate an operand on some rows only)."""
    con = duckdb.connect(":memory:")
    try:
        rows = con.execute("SELECT function_name, bool_or(function_type = 'macro') FROM duckdb_functions() "
                           "WHERE function_type IN ('scalar', 'macro') GROUP BY function_name").fetchall()
    finally:
        con.close()
    return frozenset(name.lower() for name, macro in rows if not macro)


@dataclass(frozen=True)
class PythonCall:
    """One hoisted call: the function's registry name, the column of its result, and per argument
    the input column it is (None: computed by the round's statement as ``__weir_arg_<index>``)."""

    column: str
    function: str
    columns: tuple[str | None, ...]
    arguments: tuple[int, ...]
    #: The Arrow type each argument must have to be passed as it is (None: any ``_AS_IS`` type).
    types: tuple[pa.DataType | None, ...]


@dataclass(frozen=True)
class Round:
    #: ``SELECT *, <arguments> FROM calc_input [WHERE <the step's conjuncts>]``.
    statement: str
    #: Whether the statement keeps rows out (a step's first round with conjuncts to apply).
    filters: bool
    calls: tuple[PythonCall, ...]


@dataclass(frozen=True)
class CalcSplit:
    rounds: tuple[Round, ...]
    #: The calc's statement over the hoisted calls' columns.
    query: str
    #: The registry's entries (``engine.udfs._Installed``) by name: their callbacks are called.
    entries: Mapping[str, Any]

    def run(self, batch: pa.RecordBatch, query: Callable[[str, pa.Table], pa.Table], operator_id: str) -> pa.Table:
        """The calc's result over ``batch``; ``query(sql, rows)`` runs a statement over ``rows``."""
        rows = pa.Table.from_batches([batch])
        for each in self.rounds:
            plain = None if each.filters else _plain_columns(rows, each.calls)
            if plain is None:
                rows = query(each.statement, rows)
            for call in each.calls:
                columns = plain[call.column] if plain is not None else \
                    [_array(rows.column(f"{ARGUMENT_PREFIX}{i}")) for i in call.arguments]
                rows = rows.append_column(call.column, self._call(call, columns, rows.num_rows, operator_id))
            if plain is None:
                rows = rows.drop_columns([n for n in rows.column_names if n.startswith(ARGUMENT_PREFIX)])
        return query(self.query, rows)

    def _call(self, call: PythonCall, columns: list, length: int, operator_id: str) -> pa.ChunkedArray:
        entry = self.entries[call.function]
        if length == 0:  # DuckDB calls no function on no rows
            return pa.chunked_array([], arrow_type(entry.spec.result_type))
        try:
            out = entry.callback(*columns)
        except Exception as exc:
            failure = take_failure()
            if failure is None:  # the chunk raised, and no row alone did
                record_failure(entry.spec.name, (), exc)
                failure = take_failure()
            raise failure.engine_error(operator_id) from exc
        return pa.chunked_array([out])


def _array(column: pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A column of one chunk as that chunk: the callback would copy it to combine its chunks."""
    return column.chunk(0) if column.num_chunks == 1 else column


def _plain_columns(rows: pa.Table, calls: tuple[PythonCall, ...]) -> dict[str, list] | None:
    """Each call's arguments as columns of ``rows`` when every one is an input column DuckDB would
    pass unchanged (None: the round's statement computes them)."""
    by_name: dict[str, list[str]] = {}
    for name in rows.column_names:
        by_name.setdefault(name.lower(), []).append(name)
    plain = {}
    for call in calls:
        columns = []
        for column, required in zip(call.columns, call.types):
            names = by_name.get(column.lower(), []) if column is not None else []
            if len(names) != 1:
                return None
            found = rows.column(names[0])
            if not _as_is(found.type) or (required is not None and found.type != required):
                return None
            columns.append(_array(found))
        plain[call.column] = columns
    return plain


def split(con: duckdb.DuckDBPyConnection, sql: str, entries: Mapping[str, Any], view: str) -> CalcSplit | None:
    """The plan of the calc statement ``sql`` over ``view`` with its hoistable calls of ``entries``'
    functions split out; None when it has none (or is no plain SELECT over ``view``)."""
    if not entries:
        return None
    try:
        tree = duckdb_tree.parse(con, sql)
    except duckdb_tree.UnparsedSql:
        return None
    node = duckdb_tree.select_node(tree)
    source = node.get("from_table") or {}
    if (node.get("type") != "SELECT_NODE" or source.get("type") != "BASE_TABLE"
            or source.get("table_name", "").lower() != view.lower() or node.get("group_expressions")
            or node.get("having") or node.get("qualify") or node.get("modifiers")):
        return None
    splitter = _Splitter(con, entries, view)
    steps: list[tuple[list[dict], list[_Draft]]] = []
    pending: list[dict] = []
    for conjunct in duckdb_tree.conjuncts(node.get("where_clause")):
        rewritten, drafts = splitter.hoist_step(conjunct, len(steps))
        if drafts:
            steps.append((pending, drafts))
            pending = [rewritten]
        else:
            pending.append(rewritten)
    items = [splitter.hoist_step(item, len(steps)) for item in node["select_list"]]
    drafts = [draft for _, new in items for draft in new]
    if drafts:
        steps.append((pending, drafts))
        pending = []
    if not steps:
        return None
    try:
        rounds = tuple(r for conjuncts, drafts in steps for r in splitter.rounds(tree, conjuncts, drafts))
        node["select_list"] = [rewritten for rewritten, _ in items]
        node["where_clause"] = duckdb_tree.conjunction(pending)
        return CalcSplit(rounds, duckdb_tree.write(con, tree), entries)
    except duckdb.Error:  # a tree DuckDB does not write back: the statement stays whole, as it was
        return None


@dataclass
class _Draft:
    column: str
    function: str
    arguments: list[dict]
    step: int
    level: int


class _Splitter:
    def __init__(self, con: duckdb.DuckDBPyConnection, entries: Mapping[str, Any], view: str):
        self.con, self.entries, self.view = con, entries, view.lower()
        self.scalars = _scalar_functions()
        self.columns: dict[str, _Draft] = {}
        self.by_key: dict[tuple, _Draft] = {}
        self.new: list[_Draft] = []
        self.step = 0

    def hoist_step(self, node: dict, step: int) -> tuple[dict, list[_Draft]]:
        """``node`` with its hoistable calls replaced, and the calls new in it (of step ``step``)."""
        self.step, self.new = step, []
        return self._hoist(node), self.new

    def _hoist(self, node: dict) -> dict:
        kind = node.get("class")
        if kind == "FUNCTION":
            name = str(node.get("function_name", "")).lower()
            udf = (name in self.entries and not node.get("is_operator") and not node.get("schema")
                   and not node.get("catalog"))
            strict = udf or node.get("is_operator") or name in self.scalars
            if not strict or node.get("distinct") or node.get("filter") or (node.get("order_bys") or {}).get("orders"):
                return node
            for index, argument in enumerate(duckdb_tree.arguments(node)):
                duckdb_tree.set_argument(node, index, self._hoist(argument))
            return self._call(node, name) if udf and self._computable(node) else node
        if kind == "COMPARISON":
            node["left"], node["right"] = self._hoist(node["left"]), self._hoist(node["right"])
        elif kind == "CAST":
            node["child"] = self._hoist(node["child"])
        elif kind == "OPERATOR" and node.get("type") in _STRICT_OPERATORS:
            node["children"] = [self._hoist(child) for child in node["children"]]
        return node

    def _computable(self, node: dict) -> bool:
        def walk(value: Any) -> bool:
            if isinstance(value, list):
                return all(walk(v) for v in value)
            if isinstance(value, dict):
                if "class" in value and value["class"] not in _ARGUMENT_CLASSES:
                    return False
                return all(walk(v) for v in value.values())
            return True
        return all(walk(argument) for argument in duckdb_tree.arguments(node))

    def _call(self, node: dict, name: str) -> dict:
        arguments = duckdb_tree.arguments(node)
        spec = self.entries[name].spec
        key = (name, json.dumps(self._normalised(duckdb_tree.without_locations(arguments)), sort_keys=True))
        draft = self.by_key.get(key) if spec.deterministic else None
        if draft is None:
            used = [self.columns[c] for c in _referenced(arguments) if c in self.columns]
            level = 1 + max((d.level for d in used if d.step == self.step), default=-1)
            draft = _Draft(f"{CALL_PREFIX}{len(self.columns)}", name, arguments, self.step, level)
            self.columns[draft.column] = draft
            self.by_key[key] = draft
            self.new.append(draft)
        reference = duckdb_tree.expression(self.con, duckdb_tree.quote(draft.column))
        reference["alias"] = node.get("alias", "")
        return reference

    def rounds(self, tree: dict, conjuncts: list[dict], drafts: list[_Draft]) -> list[Round]:
        """A step's rounds: its calls by level, the first round applying ``conjuncts``."""
        out = []
        for level in range(max(d.level for d in drafts) + 1):
            calls, select = [], [duckdb_tree.expression(self.con, "*")]
            for draft in (d for d in drafts if d.level == level):
                spec = self.entries[draft.function].spec
                types = spec.input_types or (None,) * len(draft.arguments)
                numbers, columns, required = [], [], []
                for argument, sql_type in zip(draft.arguments, types):
                    columns.append(self._column_of(argument))
                    required.append(arrow_type(sql_type) if sql_type is not None else None)
                    if sql_type is not None:
                        argument = duckdb_tree.cast(self.con, argument, sql_type)
                    numbers.append(len(select) - 1)
                    select.append({**argument, "alias": f"{ARGUMENT_PREFIX}{len(select) - 1}"})
                calls.append(PythonCall(draft.column, draft.function, tuple(columns), tuple(numbers), tuple(required)))
            statement = duckdb_tree.copied(tree)
            node = duckdb_tree.select_node(statement)
            node["select_list"] = select
            node["where_clause"] = duckdb_tree.conjunction(conjuncts) if level == 0 else None
            out.append(Round(duckdb_tree.write(self.con, statement), bool(conjuncts) and level == 0, tuple(calls)))
        return out

    def _normalised(self, node: Any) -> Any:
        """``node`` with its column names as DuckDB binds them (case-insensitive, unqualified)."""
        if isinstance(node, list):
            return [self._normalised(item) for item in node]
        if not isinstance(node, dict):
            return node
        if node.get("class") == "COLUMN_REF":
            column = self._column_of(node)
            if column is not None:
                return {"class": "COLUMN_REF", "column": column.lower()}
        return {k: self._normalised(v) for k, v in node.items() if k != "alias"}

    def _column_of(self, node: dict) -> str | None:
        """The input column ``node`` names (``c`` or ``<view>.c``), or None."""
        if node.get("class") != "COLUMN_REF":
            return None
        names = node.get("column_names", [])
        if len(names) == 1 or (len(names) == 2 and names[0].lower() == self.view):
            return names[-1]
        return None


def _referenced(node: Any) -> list[str]:
    """The hoisted-call columns ``node`` refers to."""
    if isinstance(node, list):
        return [c for item in node for c in _referenced(item)]
    if not isinstance(node, dict):
        return []
    if node.get("class") == "COLUMN_REF":
        name = node.get("column_names", [""])[-1]
        return [name] if name.startswith(CALL_PREFIX) else []
    return [c for value in node.values() for c in _referenced(value)]

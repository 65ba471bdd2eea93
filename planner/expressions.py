"""Binding column references and translating expressions to DuckDB SQL.

The engine evaluates expressions as DuckDB SQL text; this module is where
Flink-spelled SQL becomes that text.
"""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass

import duckdb
import pyarrow as pa
from sqlglot import exp

from weir.engine import udfs
from weir.engine.sql_eval import INPUT, connection, describe
from weir.planner.functions import FLINK_FUNCTIONS, TRANSLATED, translate_tree, typed_rewrites
from weir.planner.types import normalise, sql_name

from weir.sql.dialect import Weir
from weir.sql.errors import Problem, WeirSqlError
from weir.sql.positions import operator_position
from weir.sql.positions import position as token_position

AGGREGATES = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max", exp.Avg: "avg"}


def position(node: exp.Expression | None, fallback: tuple[int, int] | None = None) -> tuple[int | None, int | None]:
    """Line and column (1-based) where a node starts: its earliest token, or ``fallback``."""
    line, col = token_position(node)
    if line is not None:
        return line, col
    return fallback if fallback else (None, None)


@dataclass
class Scope:
    """The columns an expression may reference, and what to call them in messages."""

    schema: pa.Schema
    relation: str
    #: Where to point when an expression has no position of its own.
    fallback: tuple[int, int] | None = None

    def has(self, name: str) -> bool:
        return self.resolve(name) is not None

    def resolve(self, name: str) -> str | None:
        """The column's declared spelling, matched case-insensitively."""
        lowered = name.lower()
        for column in self.schema.names:
            if column.lower() == lowered:
                return column
        return None

    def resolve_column(self, column: exp.Column, problems: list[Problem]) -> str | None:
        """The declared name a column reference binds to; a problem when there is none.
        One relation: a qualifier (``b.price``) is ignored. ``planner.joins.JoinScope``
        resolves qualifiers over two relations."""
        declared = self.resolve(column.name)
        if declared is None:
            problems.append(self.unknown_column(column))
        return declared

    def unknown_column(self, column: exp.Column) -> Problem:
        line, col = position(column, self.fallback)
        close = difflib.get_close_matches(column.name, self.schema.names, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        hint += f"`{self.relation}` has columns: {', '.join(self.schema.names)}"
        return Problem(f"unknown column `{column.name}` in `{self.relation}`", line, col, hint)


def bind(expression: exp.Expression, scope: Scope, problems: list[Problem]) -> exp.Expression:
    """A copy of ``expression`` whose column references are unqualified and spelled
    as declared; unknown columns are added to ``problems``."""

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            declared = scope.resolve_column(node, problems)
            if declared is None:
                return node
            return exp.column(declared, quoted=True)
        return node

    before = len(problems)
    bound = expression.copy().transform(rewrite)
    if len(problems) == before:  # with every column known, check functions and operand types
        problems.extend(check_functions(bound, scope.schema))
    return bound


@functools.cache
def duckdb_functions() -> frozenset[str]:
    """DuckDB's built-in functions (on a connection of their own: no UDF among them)."""
    con = duckdb.connect(":memory:")
    try:
        names = con.sql("SELECT DISTINCT lower(function_name) FROM duckdb_functions()").fetchall()
    finally:
        con.close()
    return frozenset(n for (n,) in names)


def builtin_function(name: str) -> bool:
    """Whether ``name`` is a function of Flink's, DuckDB's or one sqlglot reads as its own."""
    if name.upper() in FLINK_FUNCTIONS or name.lower() in duckdb_functions():
        return True
    try:
        call = exp.maybe_parse(f"{name}(x)", dialect=Weir)
    except Exception:  # noqa: BLE001 - not a name that parses as a call: sqlglot's own syntax
        return True
    return not isinstance(call, exp.Anonymous)


def _bind_error(sql: str, schema: pa.Schema) -> str | None:
    """DuckDB's message when ``sql`` (one expression over ``schema``) has no function or operator
    for its argument types; None when it binds, or fails for another reason (reported elsewhere)."""
    con = connection()  # (sql_eval's: with this process's Python UDFs as they are now)
    try:
        con.register(INPUT, schema.empty_table())
        con.sql(f"SELECT {sql} FROM {INPUT} LIMIT 0").fetchall()
        return None
    except duckdb.Error as error:
        message = str(error)
        return message if any(m in message for m in _TYPE_ERRORS) else None
    finally:
        con.unregister(INPUT)


#: DuckDB's words for an expression with no function or operator for its arguments' types.
_TYPE_ERRORS = ("No function matches", "Cannot compare values", "Cannot mix values", "No operator matches",
                "Could not convert string")


def check_functions(bound: exp.Expression, schema: pa.Schema | None) -> list[Problem]:
    """Problems with the functions of a bound expression, found before DuckDB sees it: an unknown
    function (with the closest name), a date-time pattern weir cannot translate, and an operator or
    function given arguments of types it does not take (the caret on it)."""
    if not any(isinstance(n, (exp.Func, exp.Binary, exp.Unary)) for n in bound.walk()):
        return []  # columns and literals: nothing to check
    problems: list[Problem] = []
    for node in bound.walk():
        if isinstance(node, exp.Anonymous) and node.name.upper() not in TRANSLATED \
                and node.name.lower() not in duckdb_functions() and udfs.installed(node.name) is None:
            problems.append(_unknown_function(node))
        elif isinstance(node, exp.Anonymous) and udfs.installed(node.name) is not None:
            reason = udfs.arity_problem(node.name, len(node.expressions))
            if reason:
                problems.append(Problem(reason, *position(node), "call the Python function with the "
                                        "parameters it declares"))
    if problems or schema is None:  # without the input's types, only the names can be checked
        return problems
    try:
        sql = to_duckdb(bound, schema)
    except WeirSqlError as error:
        return list(error.problems)
    if not _bind_error(sql, schema):
        return _string_arithmetic(bound, schema)
    # Find the innermost call or operator that does not bind, children first.
    for node in reversed(list(bound.walk(bfs=False))):
        if not isinstance(node, (exp.Func, exp.Binary, exp.Unary)) or isinstance(node, (exp.Paren, exp.Alias)):
            continue
        try:
            message = _bind_error(to_duckdb(node, schema), schema)
        except (WeirSqlError, duckdb.Error):
            continue
        if message:
            return [_type_problem(node, message, schema)]
    return []


_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)


def _string_arithmetic(bound: exp.Expression, schema: pa.Schema) -> list[Problem]:
    """Arithmetic between a number and a string (``price + 'x'``): Flink refuses it; DuckDB casts
    the string when the row comes, failing the job then (or not at all, on no rows)."""
    nodes = [n for n in bound.walk() if isinstance(n, _ARITHMETIC)]
    if not nodes:
        return []
    columns = [f"{to_duckdb(side, schema)} AS o{i}_{j}" for i, n in enumerate(nodes)
               for j, side in enumerate((n.this, n.expression))]
    try:
        types = describe(f"SELECT {', '.join(columns)} FROM {INPUT}", schema)
    except (WeirSqlError, duckdb.Error):
        return []
    problems = []
    for i, node in enumerate(nodes):
        left, right = types.field(f"o{i}_0").type, types.field(f"o{i}_1").type
        if {_kind(left), _kind(right)} == {"number", "string"}:
            problems.append(_type_problem(node, "", schema))
    return problems[:1]


def _kind(t: pa.DataType) -> str:
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    return "string" if pa.types.is_string(t) or pa.types.is_large_string(t) else "other"


def _as_written(node: exp.Expression) -> str:
    """The expression in Flink's spelling, its names unquoted as the user most likely wrote them."""
    plain = node.copy().transform(lambda n: exp.to_identifier(n.name) if isinstance(n, exp.Identifier) else n)
    return plain.sql(dialect=Weir)


def _unknown_function(node: exp.Anonymous) -> Problem:
    name = node.name.upper()
    line, col = position(node)
    if name in FLINK_FUNCTIONS:
        return Problem(f"the function {name} is not supported by weir", line, col,
                       "see README.md for the functions weir runs; write the computation with others")
    close = difflib.get_close_matches(name, FLINK_FUNCTIONS, n=1) or \
        [n.upper() for n in difflib.get_close_matches(name.lower(), sorted(duckdb_functions()), n=1)]
    hint = f"did you mean {close[0]}?" if close else "check the spelling of the function"
    return Problem(f"unknown function {name}", line, col, hint)


#: Flink's names of calls sqlglot reads into a class named otherwise.
_FLINK_NAMES = {exp.Length: "CHAR_LENGTH", exp.Substring: "SUBSTRING", exp.StrPosition: "POSITION"}


def _type_problem(node: exp.Expression, message: str, schema: pa.Schema) -> Problem:
    operands = [node.this, node.expression] if isinstance(node, exp.Binary) else \
        [a for a in node.iter_expressions() if not isinstance(a, (exp.DataType, exp.Var))]
    types = []
    for operand in operands:
        try:
            field = describe(f"SELECT {to_duckdb(operand, schema)} AS t FROM {INPUT}", schema).field(0)
            types.append(sql_name(normalise(field.type)))
        except (WeirSqlError, duckdb.Error):
            types.append("?")
    written = _as_written(node)
    if isinstance(node, exp.Binary):
        operator = written[len(_as_written(node.this)):].strip().split(" ")[0]
        line, col = operator_position(node)
        return Problem(f"the operator {operator} cannot take {types[0]} and {types[1]}: {written}", line, col,
                       f"cast one side to the other's type, e.g. CAST({_as_written(node.expression)} AS {types[0]})")
    line, col = position(node)
    name = node.name.upper() if isinstance(node, exp.Anonymous) else _FLINK_NAMES.get(type(node), node.sql_name())
    candidates = [c.strip() for c in message.split("\n") if c.startswith("\t")]
    hint = f"{name} takes: " + "; ".join(candidates[:4]) if candidates else f"check the types of the arguments of {name}"
    return Problem(f"{name} cannot take ({', '.join(types)}): {written}", line, col, hint)


def to_duckdb(expression: exp.Expression, schema: pa.Schema | None = None) -> str:
    """DuckDB SQL for a bound expression, with Flink's functions translated
    (planner/functions.py); given the input schema, integer ``/`` divides as Flink does."""
    tree = translate_tree(expression.copy())
    if schema is not None:
        try:
            tree = typed_rewrites(tree, schema)
        except duckdb.Error:
            pass  # the expression does not bind; describing the whole query reports why
    return tree.sql(dialect="duckdb")


def is_aggregate(node: exp.Expression) -> bool:
    return isinstance(node, exp.AggFunc) or (isinstance(node, exp.Filter) and isinstance(node.this, exp.AggFunc))


def contains_aggregate(expression: exp.Expression) -> bool:
    return any(True for _ in expression.find_all(exp.AggFunc))


def output_name(item: exp.Expression, index: int) -> str:
    """The column name a select item produces: its alias, its column, or EXPR$i as in Flink."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return item.name
    return f"EXPR${index}"


def quote(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")

"""Binding column references and translating expressions to DuckDB SQL.

The engine evaluates expressions as DuckDB SQL text; this module is where
Flink-spelled SQL becomes that text.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass

import duckdb
import pyarrow as pa
from sqlglot import exp

from planner.functions import integer_division, translate

from sql.errors import Problem
from sql.positions import position as token_position

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

    return expression.copy().transform(rewrite)


def to_duckdb(expression: exp.Expression, schema: pa.Schema | None = None) -> str:
    """DuckDB SQL for a bound expression, with Flink's functions translated
    (planner/functions.py); given the input schema, integer ``/`` divides as Flink does."""
    tree = expression.copy().transform(translate)
    if schema is not None:
        try:
            tree = integer_division(tree, schema)
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

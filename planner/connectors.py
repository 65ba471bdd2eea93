"""Checking a table's WITH (...) options against the engine's connector catalogue."""
from __future__ import annotations

from engine.connectors.registry import validate_options
from planner.catalog import TableDef
from sql.errors import Problem, WeirSqlError


def check_connector(table: TableDef, role: str) -> None:
    """Raise every problem with ``table``'s options for use as a source or sink."""
    statement = table.statement
    problems = [
        Problem(f"table `{table.name}`: {error.message}", statement.line, statement.col, error.hint)
        for error in validate_options(table.options, role)
    ]
    if problems:
        raise WeirSqlError(problems)

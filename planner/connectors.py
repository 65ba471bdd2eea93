"""Checking a table's WITH (...) options against the engine's connector catalogue."""
from __future__ import annotations

import re

from weir.engine.connectors.registry import validate_options
from weir.planner.catalog import TableDef
from weir.planner.locate import locate, quoted
from weir.sql.errors import Problem, WeirSqlError


def check_connector(table: TableDef, role: str) -> None:
    """Raise every problem with ``table``'s options for use as a source or sink, each
    pointing at the option it names in the CREATE TABLE (or at its WITH)."""
    problems = []
    for error in validate_options(table.options, role):
        line, col = _where(table, error.message)
        problems.append(Problem(f"table `{table.name}`: {error.message}", line, col, error.hint))
    if problems:
        raise WeirSqlError(problems)


def _where(table: TableDef, message: str) -> tuple[int, int]:
    words = re.findall(r"'([^']*)'", message)
    keys = [word for word in words if word in table.options and word != "connector"]
    if not keys and ("unknown connector" in message or "can only be used" in message):
        keys = ["connector"]
    if keys:
        return locate(table.statement, quoted(keys[0]) + r"\s*=", after=r"\bWITH\b")
    return locate(table.statement, r"\bWITH\b")

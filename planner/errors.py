"""The planner's error: ``PlanError``, a ``WeirSqlError`` carrying one or more problems
(message, line, column, hint), and where in a statement a problem is."""
from __future__ import annotations

from sqlglot import exp

from weir.planner.expressions import position
from weir.sql.errors import WeirSqlError


class PlanError(WeirSqlError):
    pass


def column_position(expression: exp.Expression, name: str, fallback: tuple[int, int]) -> tuple[int, int]:
    """Where ``expression`` mentions the column ``name`` (any case), else where it starts."""
    for column in expression.find_all(exp.Column):
        if column.name.lower() == name.lower():
            return position(column, fallback)
    return position(expression, fallback)

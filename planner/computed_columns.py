"""Computed columns of CREATE TABLE (``v2 AS v * 2``, ``ts AS TO_TIMESTAMP(s)``, ``pt AS PROCTIME()``).

As in Flink, a computed column is an expression over the table's physical
columns (not over other computed ones), with the expression's type. The
connector reads and writes the physical columns only; ``QueryPlanner.source``
adds a calc after the source that computes the others, and the WATERMARK (which
may be on a computed column) is expanded to SQL over the physical columns
(``TableDef.physical``).
"""
from __future__ import annotations

import duckdb
import pyarrow as pa
from sqlglot import exp

from weir.engine.sql_eval import INPUT, describe
from weir.planner.expressions import Scope, bind, quote, to_duckdb
from weir.planner.types import normalise
from weir.sql import statements as st
from weir.sql.errors import Problem


def computed_columns(s: st.CreateTable, physical: pa.Schema,
                     problems: list[Problem]) -> dict[str, tuple[exp.Expression, pa.Field]]:
    """Each computed column of ``s``: its expression bound to the physical columns, and its
    field, typed by DuckDB; a problem for an unknown column or an expression that does not bind."""
    out = {}
    for column in (c for c in s.columns if c.computed is not None):
        scope = Scope(physical, s.name, (column.line, column.col))
        before = len(problems)
        bound = bind(column.computed, scope, problems)
        if len(problems) > before:
            continue
        sql = to_duckdb(bound, physical)
        try:
            (field,) = describe(f"SELECT {sql} AS {quote(column.name)} FROM {INPUT}", physical)
        except duckdb.Error as error:
            problems.append(Problem(f"cannot evaluate the computed column `{column.name}`: "
                                    f"{str(error).splitlines()[0]}", column.line, column.col,
                                    "check the expression's functions and the types of its columns"))
            continue
        out[column.name] = (bound, pa.field(column.name, normalise(field.type)))
    return out

"""The catalog: tables and views declared so far, by case-insensitive name."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from weir.sql.statements import CreateTable, CreateView


@dataclass
class TableDef:
    name: str
    schema: pa.Schema
    #: The WATERMARK FOR column and its expression (sqlglot), if any.
    watermark_column: str | None
    watermark: exp.Expression | None
    options: dict[str, str]
    primary_key: list[str]
    statement: CreateTable
    #: Computed columns (``v2 AS v * 2``): name -> expression bound to the physical columns.
    computed: dict[str, exp.Expression] = field(default_factory=dict)

    @property
    def physical_schema(self) -> pa.Schema:
        """The columns the connector reads and writes: every column but the computed ones."""
        return pa.schema([f for f in self.schema if f.name not in self.computed])

    def physical(self, expression: exp.Expression) -> exp.Expression:
        """``expression`` (bound to ``schema``) over the physical columns: each computed column
        replaced by its expression."""
        def expand(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.Column) and node.name in self.computed:
                return exp.paren(self.computed[node.name].copy())
            return node

        return expression.copy().transform(expand)


@dataclass
class ViewDef:
    name: str
    query: exp.Query
    materialized: bool
    statement: CreateView


@dataclass
class Catalog:
    tables: dict[str, TableDef] = field(default_factory=dict)
    views: dict[str, ViewDef] = field(default_factory=dict)

    def lookup(self, name: str) -> TableDef | ViewDef | None:
        key = name.lower()
        return self.tables.get(key) or self.views.get(key)

    def names(self) -> list[str]:
        return sorted({*(t.name for t in self.tables.values()), *(v.name for v in self.views.values())})

    def add_table(self, table: TableDef) -> None:
        self.tables[table.name.lower()] = table

    def add_view(self, view: ViewDef) -> None:
        self.views[view.name.lower()] = view

    def copy(self) -> "Catalog":
        return Catalog(dict(self.tables), dict(self.views))

    def drop(self, name: str) -> bool:
        key = name.lower()
        return self.tables.pop(key, None) is not None or self.views.pop(key, None) is not None

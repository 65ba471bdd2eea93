"""The catalog: tables and views declared so far, by case-insensitive name."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from sql.statements import CreateTable, CreateView


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

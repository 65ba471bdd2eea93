"""The catalog: tables, views and Python functions declared so far, by case-insensitive name."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from weir.engine import udafs, udfs, udtfs
from weir.planner.expressions import builtin_function
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
class FunctionDef:
    """A Python UDF (``engine.udfs``) or aggregate function (``engine.udafs``) callable from SQL by ``name``."""

    name: str
    #: A scalar UDF, an aggregate function (``engine.udafs``), or a table function
    #: (``engine.udtfs``, called only in LATERAL TABLE).
    function: "udfs.ScalarFunction | udafs.AggregateUdf | udtfs.TableFunction"

    @property
    def spec(self) -> "udfs.FunctionSpec | udafs.PythonAggregateSpec | udtfs.TableFunctionSpec":
        return self.function.spec(self.name)


@dataclass
class Catalog:
    tables: dict[str, TableDef] = field(default_factory=dict)
    views: dict[str, ViewDef] = field(default_factory=dict)
    functions: dict[str, FunctionDef] = field(default_factory=dict)

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
        return Catalog(dict(self.tables), dict(self.views), dict(self.functions))

    def add_function(self, definition: FunctionDef) -> None:
        """Declare a UDF, and make it callable on this process's DuckDB connections (``udfs.install``)."""
        self.functions[definition.name.lower()] = definition
        if isinstance(definition.function, udfs.ScalarFunction):
            udfs.install(definition.function, definition.name)
        elif isinstance(definition.function, udtfs.TableFunction):
            udtfs.install(definition.function, definition.name)
        else:  # an aggregate function: its calls carry it (``planner.aggregate_calls``)
            udafs.install(definition.function)

    def drop_function(self, name: str) -> bool:
        dropped = self.functions.pop(name.lower(), None)
        if dropped is not None:
            udfs.uninstall(name)
            udtfs.uninstall(name)
        return dropped is not None

    def drop(self, name: str) -> bool:
        key = name.lower()
        return self.tables.pop(key, None) is not None or self.views.pop(key, None) is not None


def register_function(catalog: Catalog, fn, name: str | None = None, *, result_type: str | None = None,
                      input_types=None, func_type: str = "general") -> FunctionDef:
    """Make ``fn`` callable from SQL as ``name`` (its own name by default): a ``@weir.udf`` function,
    or a plain one declared here (``result_type=...``). Replaces a function of the same name, as
    DuckDB's ``create_function`` would refuse to; raises ``engine.udfs.UdfError`` on a bad declaration.
    A ``@weir.udtf`` table function is called only by LATERAL TABLE, never by DuckDB: it may take
    a built-in scalar function's name."""
    if isinstance(fn, udtfs.TableFunction):
        definition = FunctionDef(name or fn.name, fn)
        catalog.add_function(definition)
        return definition
    aggregate = udafs.declaration(fn)
    if aggregate is not None or udafs.looks_aggregate(fn):  # a Python aggregate function
        fn = aggregate or udafs.AggregateUdf(fn, result_type=result_type)
    elif not isinstance(fn, udfs.ScalarFunction):
        if result_type is None:
            raise udfs.UdfError(f"{getattr(fn, '__name__', fn)!r} is not a weir UDF and no result_type is given",
                                hint="decorate it with @weir.udf(result_type='BIGINT'), or pass result_type=")
        fn = udfs.udf(fn, result_type=result_type, input_types=input_types, func_type=func_type)
    definition = FunctionDef(name or fn.name, fn)
    if builtin_function(definition.name):
        raise udfs.UdfError(f"{definition.name} is the name of a built-in function",
                            hint="give the Python function another name (weir's functions cannot shadow "
                                 "built-in ones)")
    catalog.add_function(definition)
    return definition

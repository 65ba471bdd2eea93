"""The planner: statements in, a catalog and one JobGraph out.

Every INSERT INTO and CREATE MATERIALIZED VIEW of a script becomes a
pipeline of the same job (like Flink's STATEMENT SET), so a table read by
several pipelines is read once.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND, ROW_KIND_TYPE
from weir.engine.connectors.registry import CONNECTORS
from weir.engine.graph import Edge, JobGraph
from weir.engine.runtime.sink_writer import SinkConfig
from weir.planner.changelog import sink_changelog
from weir.planner.catalog import Catalog, TableDef, ViewDef
from weir.planner.udfs import create_function, drop_function, graph_functions
from weir.planner.computed_columns import computed_columns
from weir.planner.connectors import check_connector
from weir.planner.expressions import Scope, bind, position
from weir.planner.explain import explain
from weir.planner.graph_builder import GraphBuilder, Stream
from weir.planner.late_rows import plan_bad_rows_table, plan_late_rows_tables
from weir.planner.locate import locate, name, quoted
from weir.planner.queries import QueryPlanner
from weir.planner.settings import check_setting
from weir.planner.reuse import reuse_sub_plans
from weir.planner.types import UnsupportedType, assignable, column_field, sql_name
from weir.sql import statements as st
from weir.sql.errors import Problem, WeirSqlError


@dataclass
class Script:
    """The outcome of planning a whole SQL file."""

    graph: JobGraph
    catalog: Catalog
    #: Text of each EXPLAIN statement in the file, in order.
    explains: list[str] = field(default_factory=list)
    #: Names of the materialized views the job maintains.
    materialized_views: list[str] = field(default_factory=list)
    #: Names of the late-rows tables of its sources ('source.late-rows.table').
    late_rows_tables: list[str] = field(default_factory=list)


class Planner:
    def __init__(self, *, job_name: str = "job", db_path: str = "weir.duckdb", settings: dict[str, str] | None = None):
        self.catalog = Catalog()
        #: Settings given on the command line: they win over SET and RESET in the file.
        self.fixed: dict[str, str] = dict(settings or {})
        self.settings: dict[str, str] = dict(self.fixed)
        self.db_path = db_path
        self.builder = GraphBuilder(JobGraph(job_name))
        self.explains: list[str] = []
        self.materialized_views: list[str] = []

    # -- statements --------------------------------------------------------------
    def execute(self, statement: st.Statement) -> None:
        handler = {
            st.CreateTable: self._create_table,
            st.CreateView: self._create_view,
            st.Insert: self._insert,
            st.Select: self._select,
            st.SetOption: self._set,
            st.ResetOption: self._reset,
            st.Explain: self._explain,
            st.CreateFunction: lambda s: create_function(self.catalog, s),
            st.DropFunction: lambda s: drop_function(self.catalog, s),
        }.get(type(statement))
        if handler is None:
            raise WeirSqlError(Problem(
                f"{type(statement).__name__.upper()} is a shell statement and cannot run in a job file",
                statement.line, statement.col, "run it in the interactive shell (`weir`)"))
        handler(statement)

    def script(self) -> Script:
        graph = self.builder.graph
        late_rows_tables = plan_late_rows_tables(self.builder, self.catalog, self.db_path)
        plan_bad_rows_table(self.builder, self.catalog, self.db_path, self.settings)
        graph.settings = dict(self.settings)
        reuse_sub_plans(graph)
        graph.functions = graph_functions(graph, self.catalog)
        if "pipeline.name" in self.settings:
            graph.name = self.settings["pipeline.name"]
        return Script(graph, self.catalog, self.explains, self.materialized_views, late_rows_tables)

    def _create_table(self, s: st.CreateTable) -> None:
        if self.catalog.lookup(s.name) is not None:
            if s.if_not_exists:
                return
            raise WeirSqlError(Problem(f"table or view `{s.name}` already exists", s.line, s.col,
                                       "use another name, or CREATE TABLE IF NOT EXISTS"))
        problems: list[Problem] = []
        fields = []
        for column in (c for c in s.columns if c.computed is None):  # physical columns; computed ones below
            try:
                fields.append(column_field(column.name, column.type, column.nullable))
            except UnsupportedType:
                problems.append(Problem(f"unsupported type {column.type.sql()} for column `{column.name}`",
                                        column.line, column.col,
                                        "use BIGINT, INT, DOUBLE, DECIMAL(p, s), VARCHAR, BOOLEAN, DATE or TIMESTAMP(3)"))
        computed = computed_columns(s, pa.schema(fields), problems)
        by_name = {f.name: f for f in fields} | {name: field_ for name, (_, field_) in computed.items()}
        schema = pa.schema([by_name[c.name] for c in s.columns if c.name in by_name])
        watermark_column, watermark = None, None
        if s.watermark is not None:
            watermark_column, watermark = self._watermark(s, schema, problems)
        for key in s.primary_key:
            if key not in schema.names:
                problems.append(Problem(f"primary key column `{key}` is not a column of `{s.name}`", s.line, s.col))
        if "connector" not in s.options:
            problems.append(Problem(f"table `{s.name}` has no 'connector' option", s.line, s.col,
                                    "add WITH ('connector' = 'filesystem', 'path' = '...', 'format' = 'csv')"))
        if problems:
            raise WeirSqlError(problems)
        options = dict(s.options)
        metadata = {c.name: c.metadata for c in s.columns if c.metadata is not None}
        if metadata:  # METADATA FROM 'key' columns: the connector fills them (Kafka's offset, ...)
            spec = CONNECTORS.get(options.get("connector", ""))
            if spec is not None and "weir.metadata" not in spec.options:
                column = next(c for c in s.columns if c.metadata is not None)
                raise WeirSqlError(Problem(f"connector '{spec.name}' has no metadata columns, but `{column.name}` "
                                           f"is declared METADATA", column.line, column.col,
                                           "remove METADATA, or read the table from 'kafka'"))
            options["weir.metadata"] = json.dumps(metadata)
        if s.primary_key and getattr(CONNECTORS.get(options.get("connector", "")), "keyed_by_primary_key", False):
            options["weir.primary-key"] = json.dumps(list(s.primary_key))
        self.catalog.add_table(TableDef(s.name, schema, watermark_column, watermark, options,
                                        list(s.primary_key), s, {n: e for n, (e, _) in computed.items()}))

    def _watermark(self, s: st.CreateTable, schema: pa.Schema, problems: list[Problem]):
        wm = s.watermark
        scope = Scope(schema, s.name, (wm.line, wm.col))
        column = scope.resolve(wm.column)
        if column is None:
            problems.append(Problem(f"WATERMARK FOR unknown column `{wm.column}` in `{s.name}`", wm.line, wm.col,
                                    f"`{s.name}` has columns: {', '.join(schema.names)}"))
            return None, None
        if not pa.types.is_timestamp(schema.field(column).type):
            problems.append(Problem(
                f"WATERMARK FOR `{column}`, which is {sql_name(schema.field(column).type)}, not a timestamp",
                wm.line, wm.col, "declare the column as TIMESTAMP(3)"))
            return None, None
        bound = bind(wm.expression, scope, problems)
        return column, bound

    def _create_view(self, s: st.CreateView) -> None:
        if self.catalog.lookup(s.name) is not None and not s.if_not_exists:
            raise WeirSqlError(Problem(f"table or view `{s.name}` already exists", s.line, s.col,
                                       "use another name"))
        view = ViewDef(s.name, s.query, s.materialized, s)
        if not s.materialized:
            # Check it now, on a scratch graph; it is planned again wherever it is used.
            scratch = GraphBuilder(JobGraph("check"))
            QueryPlanner(self.catalog, scratch, self.settings, (s.line, s.col)).plan_query(s.query, s.name)
            self.catalog.add_view(view)
            return
        stream = self._queries(s).plan_query(s.query, s.name)
        options = {"connector": "duckdb", "path": self.db_path, "table-name": s.name, "sink.mode": "replace"}
        changes = sink_changelog(stream, options, name=s.name, what="materialized view", primary_key=None,
                                 where=(s.line, s.col))
        self._sink(s.name, stream, options, _without_row_kind(stream.schema), "materialized view", changes)
        self.catalog.add_view(view)
        self.materialized_views.append(s.name)

    def _insert(self, s: st.Insert) -> None:
        table = self.catalog.tables.get(s.table.lower())
        if table is None:
            raise WeirSqlError(self._not_a_table(s))
        if s.columns:
            raise WeirSqlError(Problem("INSERT with a column list is not supported yet", s.line, s.col,
                                       "select every column of the table, in order"))
        check_connector(table, "sink")
        stream = self._queries(s).plan_query(s.query, table.name)
        self._check_sink_types(s, table, stream)
        changes = sink_changelog(stream, table.options, name=table.name, what="table", primary_key=table.primary_key,
                                 where=locate(s, name(s.table), after=r"\bINTO\b"))
        self._sink(table.name, stream, table.options, table.physical_schema, "table", changes)

    def _not_a_table(self, s: st.Insert) -> Problem:
        line, col = locate(s, name(s.table), after=r"\bINTO\b")
        tables = ", ".join(sorted(t.name for t in self.catalog.tables.values())) or "none"
        if s.table.lower() in self.catalog.views:
            return Problem(f"cannot INSERT INTO `{s.table}`: it is a view, and a view cannot be written to",
                           line, col, f"INSERT INTO a table declared with CREATE TABLE ... WITH ('connector' = ...); "
                           f"tables: {tables}")
        close = difflib.get_close_matches(s.table, [t.name for t in self.catalog.tables.values()], n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        return Problem(f"INSERT INTO unknown table `{s.table}`", line, col,
                       hint + f"declare it with CREATE TABLE {s.table} (...) WITH (...); tables: {tables}")

    def _select(self, s: st.Select) -> None:
        stream = self._queries(s).plan_query(s.query, "select")
        changes = sink_changelog(stream, {"connector": "print"}, name="select", what="query", primary_key=None,
                                 where=(s.line, s.col))
        self._sink("select", stream, {"connector": "print"}, _without_row_kind(stream.schema), "query", changes)

    def _set(self, s: st.SetOption) -> None:
        if s.key is None:
            return
        problem = check_setting(s.key, *locate(s, quoted(s.key))) or check_setting(
            s.key, *locate(s, quoted(s.value or ""), after=quoted(s.key)), value=s.value or "")
        if problem:
            raise WeirSqlError(problem)
        self.settings[s.key] = s.value or ""
        self.settings.update(self.fixed)

    def _reset(self, s: st.ResetOption) -> None:
        if s.key is None:
            self.settings.clear()
        else:
            self.settings.pop(s.key, None)
        self.settings.update(self.fixed)

    def _explain(self, s: st.Explain) -> None:
        scratch = Planner(job_name=self.builder.graph.name, db_path=self.db_path, settings=self.settings)
        scratch.catalog = self.catalog.copy()
        scratch.execute(s.statement)
        first_line = s.statement.text.splitlines()[0].strip()
        self.explains.append(explain(scratch.script().graph, f"EXPLAIN at line {s.line}: {first_line}"))

    # -- helpers -------------------------------------------------------------------
    def _queries(self, s: st.Statement) -> QueryPlanner:
        return QueryPlanner(self.catalog, self.builder, self.settings, (s.line, s.col))

    def _sink(self, name: str, stream: Stream, options: dict[str, str], schema: pa.Schema, what: str,
              changes: dict) -> None:
        """The sink node. ``changes`` says how it takes an updating stream (``sink_changelog``):
        then its schema ends with the row kind, and a keyed DuckDB table gets 'sink.upsert-key'."""
        description = f"Sink({what}=[{name}], connector=[{options.get('connector')}]"
        if "format" in options:
            description += f", format=[{options['format']}]"
        options = dict(options)
        if changes.get("upsert_key") is not None:
            options["sink.upsert-key"] = json.dumps(changes["upsert_key"])
            description += f", upsertKey=[{', '.join(changes['upsert_key'])}]"
        if not stream.append_only:
            schema = schema.append(pa.field(ROW_KIND, ROW_KIND_TYPE))
        self.builder.add(name, "sink", SinkConfig(options=options, table=name, **changes), schema,
                         [Edge(stream.node_id)], description + ")")

    def _check_sink_types(self, s: st.Insert, table: TableDef, stream: Stream) -> None:
        got, want = _without_row_kind(stream.schema), table.physical_schema  # computed columns are not written
        if len(got) != len(want):
            raise WeirSqlError(Problem(
                f"INSERT INTO `{table.name}` gives {_columns(len(got))} but the table has {_columns(len(want))}",
                *position(s.query.find(exp.Select) or s.query, (s.line, s.col)),
                f"the query gives ({', '.join(got.names)}); `{table.name}` has ({', '.join(want.names)})"))
        problems = []
        for index, (g, w) in enumerate(zip(got, want)):
            if not assignable(g.type, w.type):
                item = _select_item(s.query, index)
                line, col = position(item, (s.line, s.col))
                problems.append(Problem(
                    f"type mismatch with the sink: column {index + 1} (`{g.name}`) is {sql_name(g.type)} "
                    f"but `{table.name}`.`{w.name}` is {sql_name(w.type)}",
                    line, col, f"CAST it: CAST({_item_sql(item)} AS {sql_name(w.type)})"))
        if problems:
            raise WeirSqlError(problems)


def _without_row_kind(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f for f in schema if f.name != ROW_KIND])


def _select_item(query: exp.Expression, index: int) -> exp.Expression | None:
    select = query.find(exp.Select)
    if select is not None and index < len(select.expressions):
        return select.expressions[index]
    return None


def _columns(n: int) -> str:
    return f"{n} column{'s' if n != 1 else ''}"


def _item_sql(item: exp.Expression | None) -> str:
    if item is None:
        return "..."
    return (item.unalias() if isinstance(item, exp.Alias) else item).sql()


def explain_text(script: Script) -> str:
    """What `weir explain` prints: the plan of each EXPLAIN statement in the file, then the job's."""
    return "".join(text + "\n" for text in script.explains) + explain(script.graph)


def plan_script(
    statements: list[st.Statement],
    *,
    job_name: str = "job",
    db_path: str = "weir.duckdb",
    settings: dict[str, str] | None = None,
) -> Script:
    for key in settings or {}:
        problem = check_setting(key, value=settings[key])
        if problem:
            raise WeirSqlError(problem)
    planner = Planner(job_name=job_name, db_path=db_path, settings=settings)
    for statement in statements:
        planner.execute(statement)
    return planner.script()


def default_job_name(path: str | Path) -> str:
    return Path(path).stem or "job"

"""One shell session: the catalog and settings accumulated statement by
statement, the jobs started from them, and the session database.

``Session.execute`` takes one parsed statement and returns what to show (a
``Reply``); it never prints. Job statements (INSERT INTO, CREATE
MATERIALIZED VIEW, a SELECT over a streaming source) are planned by a fresh
``Planner`` holding the session's catalog and settings, so each gets a
JobGraph of its own and runs as its own job in the background.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from sqlglot import exp

from weir.engine.connectors.python_source import CONNECTOR as PYTHON_CONNECTOR
from weir.engine.errors import EngineError
from weir.engine.graph import JobGraph
from weir.engine.operators.registry import operator_class
from weir.engine.udfs import FunctionRegistry
from weir.planner.catalog import TableDef, ViewDef
from weir.planner.expressions import check_functions, output_name, to_duckdb
from weir.planner.functions import FLINK_FUNCTIONS
from weir.planner.graph_builder import GraphBuilder
from weir.planner.locate import locate, name, quoted
from weir.planner.planner import Planner, Script
from weir.planner.queries import QueryPlanner
from weir.planner.types import sql_name
from weir.shell.database import ResultDatabase
from weir.shell.jobs import Job, JobManager
from weir.shell.live import LiveResult, redirect_to
from weir.shell.render import THOUSANDS, timestamp
from weir.shell.vocabulary import FUNCTIONS
from weir.sql import statements as st
from weir.sql.errors import Problem, WeirSqlError

RESULT_MODE = "sql-client.execution.result-mode"
#: SHOW CATALOGS / SHOW DATABASES: Flink's default names, weir's only catalog and database.
DEFAULT_CATALOG = "default_catalog"
DEFAULT_DATABASE = "default_database"
_IDENTIFIER = re.compile(r"[A-Z_][A-Z0-9_]*")
#: DuckDB's function names, read once per process.
_BUILTIN_FUNCTIONS: set[str] | None = None
SAVEPOINT_PATH = "execution.savepoint.path"
RESULT_MODES = ("table", "changelog", "tableau")
TABLEAU_PENDING_ROWS = 10_000


@dataclass
class Message:
    text: str


@dataclass
class JobStarted(Message):
    """A job statement's reply: what the shell prints, and the job it started."""
    job: Job


class ResultTable:
    """A query's answer: an Arrow table, or one kept in DuckDB (``render.DuckAnswer``) that the
    shell shows the first and last rows of; ``table`` is all of it, as Arrow."""

    def __init__(self, table):
        self.answer = table

    @property
    def table(self) -> pa.Table:
        if not isinstance(self.answer, pa.Table):
            answer, self.answer = self.answer, self.answer.all()
            answer.close()
        return self.answer

    def close(self) -> None:
        if not isinstance(self.answer, pa.Table):
            self.answer.close()


@dataclass
class LiveQuery:
    job: Job
    result: LiveResult
    mode: str


Reply = Message | ResultTable | LiveQuery


class Session:
    def __init__(self, *, db_path: str = "weir.duckdb", settings: dict[str, str] | None = None,
                 jobs: JobManager | None = None):
        #: Settings given on the command line: they win over SET and RESET.
        self.fixed = dict(settings or {})
        self.settings = dict(self.fixed)
        self.db_path = db_path
        self.database = ResultDatabase(db_path)
        self.jobs = jobs or JobManager()
        self.catalog = Planner().catalog
        #: The Python UDFs the catalog's functions are callable as, this session's own
        #: (``engine.udfs.FunctionRegistry``; ``Connection`` makes it current around its calls).
        self.functions = FunctionRegistry()
        #: Which job maintains each materialized view (lower-case name -> job).
        self.maintainers: dict[str, Job] = {}
        #: The database's tables as of the last statement, for completion.
        self._stored: dict[str, list[tuple[str, str]]] | None = None

    # -- dispatch ----------------------------------------------------------------
    def execute(self, s: st.Statement) -> Reply:
        if isinstance(s, st.Select):
            return self._select(s)
        if isinstance(s, st.Insert) or (isinstance(s, st.CreateView) and s.materialized):
            return self._start_job(s)
        handler = {
            st.SetOption: self._set,
            st.Show: self._show,
            st.Describe: self._describe,
            st.Drop: self._drop,
            st.StopJob: self._stop_job,
        }.get(type(s))
        if handler is not None:
            return handler(s)
        planner = self._planner()
        planner.execute(s)  # CREATE TABLE, CREATE VIEW, RESET, EXPLAIN
        self.settings = dict(planner.settings)
        if isinstance(s, st.Explain):
            return Message(planner.explains[-1].rstrip("\n"))
        if isinstance(s, st.CreateTable):
            return Message(f"created table {s.name}")
        if isinstance(s, st.CreateView):
            return Message(f"created view {s.name}")
        if isinstance(s, (st.CreateFunction, st.DropFunction)):
            return Message(f"{'created' if isinstance(s, st.CreateFunction) else 'dropped'} function {s.name}")
        return Message(f"reset {s.key}" if getattr(s, "key", None) else "reset every setting")

    def _planner(self, job_name: str = "shell") -> Planner:
        planner = Planner(job_name=job_name, db_path=self.db_path, settings=self.fixed)
        planner.catalog = self.catalog
        planner.settings.update(self.settings)
        planner.settings.update(self.fixed)
        return planner

    # -- jobs ----------------------------------------------------------------------
    def _start_job(self, s: st.Insert | st.CreateView) -> JobStarted:
        """Plan and start the job. 'execution.savepoint.path' applies to this one job: it is
        used up here (unlike Flink's SQL client, where it stays set for every later job). A
        CREATE MATERIALIZED VIEW resuming from the savepoint its stopped job was stopped with
        maintains the view again, keeping its rows: STOP JOB ... WITH SAVEPOINT's recipe."""
        target = s.table if isinstance(s, st.Insert) else s.name
        savepoint = self.settings.get(SAVEPOINT_PATH)
        resumed = self.resumed_view(s, savepoint)
        planner = self._planner(job_name=target)
        if resumed is not None:
            self.catalog.drop(resumed.name)  # planned again below, from the same statement
        try:
            planner.execute(s)
        except BaseException:
            if resumed is not None:
                self.catalog.add_view(resumed)
            raise
        kind = "insert" if isinstance(s, st.Insert) else "materialized view"
        graph = planner.script().graph
        if isinstance(s, st.CreateView):
            sink = next(node for node in graph.nodes if operator_class(node.kind).commits_output)
            self.database.create_if_missing(s.name, sink.output_schema)
        if savepoint:
            self.settings.pop(SAVEPOINT_PATH, None)
            self.fixed.pop(SAVEPOINT_PATH, None)
        job = self.start(graph, kind, from_savepoint=savepoint or None)
        resuming = f", resuming from the savepoint {savepoint}" if savepoint else ""
        if isinstance(s, st.CreateView):
            self.maintainers[s.name.lower()] = job
            return JobStarted(f"job {job.id} started: materialized view {s.name} in {self.db_path}{resuming}", job)
        return JobStarted(f"job {job.id} started: INSERT INTO {s.table}{resuming}", job)

    def start(self, graph: JobGraph, kind: str, **options) -> Job:
        """Start a planned job (``JobManager.start``'s options), after the checks every job of a
        session passes: one reading or writing Python objects runs in this process."""
        check_python_objects(graph)
        return self.jobs.start(graph, kind, **options)

    def plan_job(self, statements: list[st.Statement], job_name: str) -> Script:
        """Plan a whole script as one job, as `weir run` plans a file, over this session's
        catalog and settings: its CREATE TABLE and CREATE VIEW statements join the catalog, and
        every INSERT INTO and CREATE MATERIALIZED VIEW becomes part of one JobGraph. A CREATE
        TABLE the catalog already holds, word for word, declares the same table (a script
        submitted again, to resume it from a savepoint)."""
        planner = self._planner(job_name=job_name)
        for statement in statements:
            known = self.catalog.lookup(statement.name) if isinstance(statement, st.CreateTable) else None
            if isinstance(known, TableDef) and known.statement.text == statement.text:
                continue
            planner.execute(statement)  # a shell statement (SHOW, STOP JOB ...) is refused, by name
        script = planner.script()
        for view in script.materialized_views:
            sink = next(node for node in script.graph.nodes if operator_class(node.kind).commits_output
                        and node.connector_options().get("table-name") == view)
            self.database.create_if_missing(view, sink.output_schema)
        return script

    def resumed_view(self, s: st.Statement, savepoint: str | None) -> ViewDef | None:
        """The materialized view that ``s`` maintains again from ``savepoint``, where its job
        was stopped with that savepoint; None otherwise."""
        if not savepoint or not isinstance(s, st.CreateView) or not s.materialized:
            return None
        job = self.maintainers.get(s.name.lower())
        found = self.catalog.lookup(s.name)
        if job is None or job.running or job.savepoint is None or not isinstance(found, ViewDef):
            return None
        if Path(job.savepoint).resolve() != Path(savepoint).resolve():
            return None
        return found

    def _select(self, s: st.Select) -> Reply:
        if not self.reads_a_stream(s.query):
            return ResultTable(self.query_database(s, whole=False))
        mode = self.result_mode()
        graph = self.plan_select(s)
        sink = next(node for node in graph.nodes if operator_class(node.kind).commits_output)
        result = LiveResult(sink.output_schema, max_pending=TABLEAU_PENDING_ROWS if mode == "tableau" else None)
        redirect_to(graph, result)
        return LiveQuery(self.start(graph, "select"), result, mode)

    def plan_select(self, s: st.Select) -> JobGraph:
        """A streaming SELECT planned as a job whose one sink is still the planner's `print`
        sink, at parallelism 1 (its result goes to an object in this process)."""
        planner = self._planner(job_name="select")
        planner.execute(s)
        graph = planner.script().graph
        graph.settings["parallelism.default"] = "1"
        return graph

    def result_mode(self) -> str:
        return self.settings.get(RESULT_MODE, "table").lower()

    def reads_a_stream(self, query: exp.Expression) -> bool:
        """True when the query reads a declared table or a plain view: then it
        runs as a job. Otherwise (materialized views, result tables in the
        database, no table at all) DuckDB answers it at once."""
        ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
        for table in query.find_all(exp.Table):
            if table.name.lower() in ctes:
                continue
            found = self.catalog.lookup(table.name)
            if isinstance(found, TableDef) or (isinstance(found, ViewDef) and not found.materialized):
                return True
        return False

    def query_database(self, s: st.Select, whole: bool = True):
        """The answer of a SELECT over the database: an Arrow table, or (``whole=False``) a
        ``render.DuckAnswer`` (kept in DuckDB, read as far as it is shown)."""
        schema = self._single_table_schema(s.query)
        # The same plan-time checks as a streaming query's: unknown functions, operand types.
        parts = [*s.query.expressions, *(s.query.args[k].this for k in ("where", "having") if s.query.args.get(k))] \
            if isinstance(s.query, exp.Select) else [s.query]
        problems = [p for part in parts for p in check_functions(part, schema)]
        if problems:
            raise WeirSqlError(problems)
        try:
            sql = to_duckdb(_flink_names(s.query), schema)
        except Exception:  # noqa: BLE001 - a query sqlglot cannot write for DuckDB goes as written
            sql = s.text
        return self.database.query(sql) if whole else self.database.answer(sql)

    def _single_table_schema(self, query: exp.Expression) -> pa.Schema | None:
        """The columns of the one result table a plain SELECT reads, so that its expressions are
        typed as a streaming query's are (CAST of a fraction to an integer truncates, ROUND of a
        DOUBLE rounds half up); None for any other query (integer '/' still divides as integers)."""
        tables = list(query.find_all(exp.Table))
        if not isinstance(query, exp.Select) or len(tables) != 1 or query.args.get("joins") or query.find(exp.CTE):
            return None
        try:
            return self.database.query(f"SELECT * FROM {tables[0].sql(dialect='duckdb')} LIMIT 0").schema
        except Exception:  # noqa: BLE001 - not a table of the database: the query reports it
            return None

    def _stop_job(self, s: st.StopJob) -> Message:
        job = self.jobs.get(s.job_id)
        if job is None:
            known = ", ".join(j.id for j in self.jobs.running()) or "none"
            raise WeirSqlError(Problem(f"no job with id '{s.job_id}'", *locate(s, quoted(s.job_id)),
                                       f"running jobs: {known}; SHOW JOBS lists every job"))
        if not job.running:
            return Message(f"job {job.id} is not running: it is {job.status}")
        if not s.with_savepoint:
            self.jobs.cancel(job)
            return Message(f"job {job.id} stopped ({job.status}); output not yet committed was discarded")
        try:
            path = self.jobs.stop_with_savepoint(job)
        except EngineError as error:
            return Message(f"job {job.id} was not stopped: {error.message}")
        return Message(f"job {job.id} stopped with a savepoint at {path}; resume it with "
                       f"SET '{SAVEPOINT_PATH}' = '{path}'; and the same statement")

    # -- SET, SHOW, DESCRIBE, DROP --------------------------------------------------
    def _set(self, s: st.SetOption) -> Message | ResultTable:
        if s.key is None:
            if not self.settings:
                return Message("nothing is set: every setting has its default")
            keys = sorted(self.settings)
            return ResultTable(pa.table({"key": keys, "value": [self.settings[k] for k in keys]}))
        if s.key == RESULT_MODE and (s.value or "").lower() not in RESULT_MODES:
            raise WeirSqlError(Problem(f"unknown result mode '{s.value}'", *locate(s, quoted(s.value or "")),
                                       "use 'table', 'changelog' or 'tableau'"))
        planner = self._planner()
        planner.execute(s)
        self.settings = dict(planner.settings)
        return Message(f"set '{s.key}' = '{s.value}'")

    def _show(self, s: st.Show) -> ResultTable | Message:
        what = s.what.upper()
        if what == "TABLES":
            tables = sorted(self.catalog.tables.values(), key=lambda t: t.name.lower())
            return ResultTable(pa.table({"table name": [t.name for t in tables],
                                         "connector": [t.options.get("connector", "") for t in tables]}))
        if what == "VIEWS":
            return ResultTable(self._views())
        if what == "JOBS":
            return ResultTable(jobs_table(list(self.jobs.jobs.values())))
        if what in ("FUNCTIONS", "USER FUNCTIONS"):
            names = sorted(f.name for f in self.catalog.functions.values()) if what == "USER FUNCTIONS" \
                else self.function_names()
            return ResultTable(pa.table({"function name": pa.array(names, pa.string())}))
        # Flink's names: weir has one catalog and one database (the session's tables, views and
        # the result tables of its database file).
        if what in ("CATALOGS", "CURRENT CATALOG"):
            return ResultTable(pa.table({"catalog name" if what == "CATALOGS" else "current catalog name":
                                         [DEFAULT_CATALOG]}))
        if what in ("DATABASES", "CURRENT DATABASE"):
            return ResultTable(pa.table({"database name" if what == "DATABASES" else "current database name":
                                         [DEFAULT_DATABASE]}))
        if what in ("CREATE TABLE", "CREATE VIEW"):
            return self._show_create(s, what.split()[1])
        raise WeirSqlError(Problem(f"SHOW {what} is not supported", s.line, s.col,
                                   "use SHOW TABLES, VIEWS, JOBS, FUNCTIONS, CATALOGS, DATABASES or CREATE TABLE t"))

    def _show_create(self, s: st.Show, kind: str) -> Message:
        """The statement that declared a table or view, as written (Flink's SHOW CREATE); for a
        result table of the database alone, DuckDB's CREATE TABLE of it."""
        found = self.catalog.lookup(s.name)
        if isinstance(found, TableDef if kind == "VIEW" else ViewDef):
            other = "TABLE" if kind == "VIEW" else "VIEW"
            raise WeirSqlError(Problem(f"`{found.name}` is a {other.lower()}", *locate(s, name(s.name)),
                                       f"use SHOW CREATE {other} {found.name}"))
        if found is not None:
            return Message(found.statement.text.strip().rstrip(";") + ";")
        if kind == "TABLE" or s.name in self.database_tables():
            connection = self.database.connect()
            try:
                rows = connection.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ? "
                                          "AND database_name = current_database()", [s.name]).fetchall()
            finally:
                connection.close()
            if rows:
                return Message(rows[0][0].strip().rstrip(";") + ";")
        raise self._unknown(s, s.name)

    def function_names(self) -> list[str]:
        """Every function a query may call: DuckDB's (``duckdb_functions()``), the Flink functions
        the dialect translates or knows, the window table functions, and this session's UDFs."""
        global _BUILTIN_FUNCTIONS
        if _BUILTIN_FUNCTIONS is None:
            import duckdb

            with duckdb.connect() as connection:
                rows = connection.execute("SELECT DISTINCT upper(function_name) FROM duckdb_functions() "
                                          "WHERE function_type IN ('scalar', 'aggregate', 'macro', 'window') "
                                          ).fetchall()
            builtin = {name for (name,) in rows if _IDENTIFIER.fullmatch(name)}
            _BUILTIN_FUNCTIONS = builtin | set(FLINK_FUNCTIONS) | set(FUNCTIONS)
        return sorted(_BUILTIN_FUNCTIONS | {f.name.upper() for f in self.catalog.functions.values()})

    def _views(self) -> pa.Table:
        names, kinds, jobs = [], [], []
        for view in sorted(self.catalog.views.values(), key=lambda v: v.name.lower()):
            job = self.maintainers.get(view.name.lower())
            names.append(view.name)
            kinds.append("materialized view" if view.materialized else "view")
            jobs.append(f"{job.id} ({job.status})" if job else "-")
        for table in sorted(self.database_tables()):
            if self.catalog.lookup(table) is None:
                names.append(table)
                kinds.append(f"result table in {self.db_path}")
                jobs.append("-")
        return pa.table({"view name": names, "kind": kinds, "job": jobs})

    def database_tables(self) -> dict[str, list[tuple[str, str]]]:
        try:
            return self.database.tables(wait=1.0)
        except Exception:  # noqa: BLE001 - held by another process: show what the catalog knows
            return {}

    def _describe(self, s: st.Describe) -> ResultTable:
        found = self.catalog.lookup(s.name)
        if isinstance(found, TableDef):
            return ResultTable(_describe_table(found))
        if isinstance(found, ViewDef):
            scratch = QueryPlanner(self.catalog, GraphBuilder(JobGraph("describe")), self.settings, (s.line, s.col))
            schema = scratch.plan_query(found.query, found.name).schema
            return ResultTable(_columns(schema))
        stored = self.database_tables().get(s.name) or self.database_tables().get(s.name.lower())
        if stored:
            return ResultTable(pa.table({"name": [c for c, _ in stored], "type": [t for _, t in stored]}))
        raise self._unknown(s, s.name)

    def _unknown(self, s: st.Statement, what: str) -> WeirSqlError:
        known = ", ".join(self.catalog.names()) or "none"
        return WeirSqlError(Problem(f"unknown table or view `{what}`", *locate(s, name(what)),
                                    f"known tables and views: {known}"))

    def _drop(self, s: st.Drop) -> Message:
        found = self.catalog.lookup(s.name)
        stored = s.kind == "VIEW" and found is None and s.name in self.database_tables()
        if found is None and not stored:
            if s.if_exists:
                return Message(f"no {s.kind.lower()} {s.name}: nothing dropped")
            raise self._unknown(s, s.name)
        if s.kind == "TABLE" and isinstance(found, ViewDef):
            raise WeirSqlError(Problem(f"`{found.name}` is a view", *locate(s, name(s.name)), "use DROP VIEW"))
        if s.kind == "VIEW" and isinstance(found, TableDef):
            raise WeirSqlError(Problem(f"`{found.name}` is a table", *locate(s, name(s.name)), "use DROP TABLE"))
        job = self.maintainers.get(s.name.lower())
        if job is not None and job.running:
            raise WeirSqlError(Problem(f"job {job.id} maintains the materialized view `{s.name}`",
                                       *locate(s, name(s.name)), f"stop it first: STOP JOB '{job.id}'"))
        if stored or (isinstance(found, ViewDef) and found.materialized):
            self.database.drop(found.name if found else s.name)
        self.catalog.drop(s.name)
        self.maintainers.pop(s.name.lower(), None)
        return Message(f"dropped {s.kind.lower()} {found.name if found else s.name}")

    # -- for completion ------------------------------------------------------------
    def refresh(self) -> None:
        """Read the database's tables again (after a statement), for completion."""
        self._stored = self.database_tables()

    def columns_by_table(self) -> dict[str, list[str]]:
        """Every table and view this session can read, with its columns."""
        if self._stored is None:
            self.refresh()
        found = {table: [c for c, _ in columns] for table, columns in (self._stored or {}).items()}
        for table in self.catalog.tables.values():
            found[table.name] = list(table.schema.names)
        for view in self.catalog.views.values():
            try:
                scratch = QueryPlanner(self.catalog, GraphBuilder(JobGraph("complete")), self.settings, (1, 1))
                found[view.name] = list(scratch.plan_query(view.query, view.name).schema.names)
            except Exception:  # noqa: BLE001 - a view that no longer plans has no columns to offer
                found.setdefault(view.name, [])
        return found


def check_python_objects(graph: JobGraph) -> None:
    """A job reading or writing Python objects (``Connection.register``) runs at parallelism 1:
    the objects are in this process, a parallel job's workers in others."""
    tables = sorted({node.id.split(".")[0] for node in graph.nodes
                     if node.connector_options().get("connector") == PYTHON_CONNECTOR})
    parallelism = graph.settings.get("parallelism.default", "1")
    if tables and parallelism.strip() != "1":
        raise EngineError(
            f"job {graph.name} reads or writes Python objects ({', '.join(tables)}), which live in this "
            f"process; it cannot run at 'parallelism.default' = '{parallelism}'",
            hint="SET 'parallelism.default' = '1' for this job (its workers would be other processes)")


def _flink_names(query: exp.Expression) -> exp.Expression:
    """The query with its unnamed result columns named as a streaming query names them (Flink's
    EXPR$n), not as DuckDB would (``count_star()``)."""
    if not isinstance(query, exp.Select):
        return query
    named = query.copy()
    items = [item if isinstance(item, (exp.Alias, exp.Star)) or (isinstance(item, exp.Column))
             else exp.alias_(item, output_name(item, index), quoted=True)
             for index, item in enumerate(named.expressions)]
    named.set("expressions", items)
    return named


def _describe_table(table: TableDef) -> pa.Table:
    rows = {"name": [], "type": [], "null": [], "key": [], "watermark": []}
    watermark = table.statement.watermark
    for field in table.schema:
        rows["name"].append(field.name)
        rows["type"].append(sql_name(field.type) + ("" if field.name != table.watermark_column else " *ROWTIME*"))
        rows["null"].append("TRUE" if field.nullable else "FALSE")
        rows["key"].append("PRI" if field.name in table.primary_key else "")
        rows["watermark"].append(watermark.expression.sql() if watermark and field.name == table.watermark_column
                                 else "")
    return pa.table(rows)


def _columns(schema: pa.Schema) -> pa.Table:
    return pa.table({"name": schema.names, "type": [sql_name(f.type) for f in schema]})


def _checkpoint_id(text: str) -> int | None:
    """A job's last checkpoint as its id (``Job.last_checkpoint`` spells it; "-" before the first)."""
    return int(text) if text.isdigit() else None


def jobs_table(jobs: list[Job]) -> pa.Table:
    """SHOW JOBS: the counts are integers, shown with thousands separators (``render.THOUSANDS``),
    the last checkpoint's id an integer too (NULL before the first), so that every client
    right-aligns them as numbers."""
    counted = pa.schema([("id", pa.string()), ("name", pa.string()), ("status", pa.string()),
                         pa.field("rows in", pa.int64(), metadata=THOUSANDS),
                         pa.field("rows out", pa.int64(), metadata=THOUSANDS),
                         ("watermark", pa.string()), ("last checkpoint", pa.int64())])
    return pa.table({
        "id": [j.id for j in jobs],
        "name": [j.name for j in jobs],
        "status": [j.status for j in jobs],
        "rows in": pa.array([j.rows_in() for j in jobs], pa.int64()),
        "rows out": pa.array([j.rows_out() for j in jobs], pa.int64()),
        "watermark": [timestamp(j.watermark()) for j in jobs],
        "last checkpoint": pa.array([_checkpoint_id(j.last_checkpoint()) for j in jobs], pa.int64()),
    }, schema=counted)

"""weir from Python: ``weir.connect`` and ``weir.run``.

A ``Connection`` is a shell session (``shell/session.py``: the same catalog,
SET keys and statements) driven from Python; the shell and `weir run` are
built on it. What each call gives back:

- ``execute(sql)`` runs every statement of the text; it returns the last
  one's answer: a ``Result`` (SELECT over result tables, SHOW, DESCRIBE, SET),
  a ``JobHandle`` (INSERT INTO, CREATE MATERIALIZED VIEW: each its own job, as
  in the shell), a ``ChangeStream`` (a SELECT over a streaming source) or the
  shell's message as text (CREATE TABLE, EXPLAIN: the plan, ...).
- ``submit(sql_or_path)`` plans a whole script as one job, as `weir run`
  plans a file, and starts it in the background: a ``JobHandle``.
- ``sql(query)`` answers from the committed result tables (DuckDB); a
  query over a streaming source is refused, naming ``stream``: it may never end.
- ``stream(query)`` runs a query as a job whose changes arrive as Arrow
  batches, ``op`` first (+I, -U, +U, -D); closing the stream (leaving the
  loop over it, ``close()``, or dropping it) cancels the job.
- ``subscribe(view)`` yields a materialized view's changes as they are
  committed: the committed table diffed with DuckDB (``EXCEPT ALL``) each time
  its job in this connection completes a checkpoint or ends. A view with an
  upsert key (its sink's: GROUP BY keys, a PRIMARY KEY) shows a changed row as
  -U of the old and +U of the new, a new key as +I, a key gone as -D; a view
  without one (append-only, or a keyless updating join) shows -D per row gone
  and +I per row come, as does a view whose job runs elsewhere (its key is not
  known here), read again every ``interval`` seconds until closed.
- ``register(name, data, watermark=...)`` / ``register_sink(name, callback,
  schema)``: Python objects as tables (``engine/connectors/python_source.py``).
- ``create_function(name, fn, ...)``: a Python function as a SQL function
  (``planner.catalog.register_function``; ``weir.udf`` declares one).

Errors are the shell's: ``WeirSqlError`` (message, line, column, hint) for the
SQL, ``EngineError`` (message, hint, operator) for a job, ``DatabaseError``
for a query of the result tables.
"""
from __future__ import annotations

import functools
import itertools
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from sqlglot import exp

from weir.engine import udfs
from weir.engine.connectors import python_source
from weir.engine.errors import EngineError
from weir.engine.operators.registry import operator_class
from weir.engine.pandas_import import arrow_array, defer_pandas
from weir.engine.runtime import control
from weir.engine.runtime.local import JobResult
from weir.planner.catalog import register_function
from weir.planner.planner import Script, default_job_name
from weir.planner.types import sql_name
from weir.shell.jobs import FAILED, Job, JobManager, JobMetrics
from weir.shell.live import BatchQueue, redirect_to
from weir.shell.session import JobStarted, ResultTable, Session
from weir.sql import parse
from weir.sql import statements as st
from weir.sql.errors import Problem, WeirSqlError

__all__ = ["connect", "run", "Connection", "JobHandle", "Result", "ChangeStream", "Subscription"]

# pyarrow would import pandas (~1 s) on a job's first conversion, as it would under `weir run`
# without the same call (shell/cli.py): a user who imports pandas gets it told to pyarrow then.
defer_pandas()

#: Seconds a stream or subscription waits at a time for its job, between checks that it still runs.
POLL_SECONDS = 0.5


def connect(db: str = "weir.duckdb", settings: dict[str, str] | None = None, *,
            state_dir: str | Path | None = None) -> "Connection":
    """A session like the shell's. ``db``: where materialized views live. ``settings``: as
    `--set KEY=VALUE` (they win over SET). ``state_dir``: where the jobs started with
    ``execute`` and ``submit`` checkpoint, one folder per job (default: a new temporary folder)."""
    return Connection(db, settings, state_dir=state_dir)


def run(path_or_sql: str | Path, *, db: str = "weir.duckdb", settings: dict[str, str] | None = None,
        name: str | None = None, state_dir: str | Path | None = None, from_savepoint: str | Path | None = None,
        fresh: bool = False) -> JobResult:
    """Run a SQL file (or text) to the end, as `weir run` does: in the state directory
    ``state_dir``, else ``.weir/<job name>`` (checkpoints there, or in 'state.checkpoints.dir'); resuming from its
    latest checkpoint if an earlier run did not finish; running nothing when it had finished
    (``result.already_finished``; ``fresh=True`` starts over). Raises the job's EngineError."""
    with connect(db, settings, state_dir=Path(".weir")) as con:
        job = con.submit(path_or_sql, name=name, state_dir=state_dir or _default_state_dir,
                         from_savepoint=from_savepoint, fresh=fresh)
        job.wait()
        return job.result


#: ``submit``'s state_dir meaning "as `weir run`": .weir/<job name>.
_default_state_dir = object()


class Result:
    """Rows answered at once: a relation with DuckDB's spellings."""

    def __init__(self, table: pa.Table):
        self._table = table

    @property
    def columns(self) -> list[str]:
        return self._table.column_names

    def arrow(self) -> pa.Table:
        return self._table

    def fetchall(self) -> list[tuple]:
        columns = [self._table.column(i).to_pylist() for i in range(self._table.num_columns)]
        return list(zip(*columns))

    def df(self):
        """The rows as a pandas DataFrame, with the dtypes DuckDB's ``.df()`` gives (converted by
        DuckDB): TIMESTAMP and DATE as datetime64, an integer or BOOLEAN column with NULLs as
        pandas' nullable Int64 / boolean, DECIMAL as float64."""
        try:
            import pandas  # noqa: F401 - optional: only this method needs it
        except ImportError:
            raise ImportError("Result.df() needs pandas, which is not installed: pip install 'weir[pandas]' "
                              "(or use .arrow() or .fetchall())") from None
        with duckdb.connect(":memory:") as con:
            return con.from_arrow(self._table).df()

    def __len__(self) -> int:
        return self._table.num_rows

    def __repr__(self) -> str:
        return f"<weir.Result {self._table.num_rows} rows: {', '.join(self.columns)}>"


class JobHandle:
    """A job running in the background (``Connection.submit``, ``execute``, ``stream``)."""

    def __init__(self, job: Job, jobs: JobManager):
        self._job = job
        self._jobs = jobs

    @property
    def id(self) -> str:
        return self._job.id

    @property
    def name(self) -> str:
        return self._job.name

    @property
    def status(self) -> str:
        """RUNNING, FINISHED, FAILED, CANCELED (stopped without a savepoint) or STOPPED (with one)."""
        return self._job.status

    @property
    def error(self) -> EngineError | None:
        return self._job.error

    @property
    def result(self) -> JobResult | None:
        """The summary of an ended job (per-operator rows, checkpoints, late rows); None before."""
        return self._job.result

    @property
    def state_dir(self) -> Path:
        return self._job.state_dir

    def metrics(self) -> JobMetrics:
        """The figures the job's own thread last published: rows in and out (in total and per
        operator), watermark, last checkpoint and late rows."""
        return self._job.metrics

    def wait(self, timeout: float | None = None) -> str:
        """Wait for the job to end and return its status; raise its EngineError if it failed,
        TimeoutError if it still runs after ``timeout`` seconds."""
        if not self._job.done.wait(timeout):
            raise TimeoutError(f"job {self.id} is still running after {timeout} s")
        if self._job.status == FAILED and self._job.error is not None:
            raise self._job.error
        return self._job.status

    def savepoint(self, path: str | Path | None = None, timeout: float = 300.0) -> str:
        """Take a savepoint (the job goes on) and return where it is."""
        self._check_rewindable()
        self._job.started.wait(timeout)
        if self._job.done.is_set():
            raise EngineError(f"job {self.id} ended before it could take a savepoint: it is {self.status}")
        answer = control.send(self._job.state_dir / "control", "savepoint", Path(path) if path else None,
                              timeout=timeout)
        if not answer.get("ok"):
            raise EngineError(f"job {self.id} took no savepoint: {answer.get('error')}")
        return answer["path"]

    def stop(self, savepoint: bool = True, timeout: float = 300.0) -> str | None:
        """Stop the job: with a savepoint (returned: resume with ``submit(..., from_savepoint=)``),
        else cancelled, its uncommitted output discarded. A job that has ended is left as it is."""
        if self._job.done.is_set():
            return self._job.savepoint
        if not savepoint:
            self._jobs.cancel(self._job, timeout)
            return None
        self._check_rewindable()
        return self._jobs.stop_with_savepoint(self._job, timeout)

    def _check_rewindable(self) -> None:
        unrewindable = [node.id.split(".")[0] for node in self._job.graph.nodes
                        if operator_class(node.kind).reads_source
                        and (options := node.connector_options()).get("connector") == python_source.CONNECTOR
                        and not python_source.rewindable(options["object-id"])]
        if unrewindable:
            raise EngineError(f"job {self.id} reads an iterator ({', '.join(unrewindable)}), which cannot be "
                              "rewound: a savepoint of it could not be resumed",
                              hint="register a pyarrow.Table to take savepoints, or stop with savepoint=False")

    def __repr__(self) -> str:
        return f"<weir.JobHandle {self.id} {self.name} {self.status}>"


class ChangeStream:
    """The changes of a streaming query, as Arrow record batches led by ``op`` (+I, -U, +U, -D).
    Iterate over it; ``close()`` (or leaving a ``with`` block, or dropping the stream) cancels its
    job. ``for b in con.stream(q): ... break`` drops the stream, and so stops the job, on leaving."""

    def __init__(self, job: JobHandle, queue: BatchQueue):
        self.job = job
        self._queue = queue
        self._closed = False

    @property
    def schema(self) -> pa.Schema:
        """The schema of the batches: ``op``, then the query's columns."""
        return python_source.with_op(pa.RecordBatch.from_pylist([], schema=self._queue.schema)).schema

    def __iter__(self) -> "ChangeStream":
        return self

    def __next__(self) -> pa.RecordBatch:
        job = self.job._job
        while not self._closed:
            batch = self._queue.take(POLL_SECONDS)
            if batch is not None:
                return python_source.with_op(batch)
            if self._queue.drained:
                job.done.wait()  # the sink has finished: the job is committing its last checkpoint
            if job.done.is_set() and self._queue.take(0) is None:
                self.close()
                if job.status == FAILED and job.error is not None:
                    raise job.error
        raise StopIteration

    def close(self) -> None:
        """Stop the query's job (CANCELED) and drop what it still sends."""
        if self._closed:
            return
        self._closed = True
        self._queue.close()
        job = self.job._job
        if job.running:
            self.job._jobs.cancel(job)

    def __enter__(self) -> "ChangeStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit the job machinery may be gone
            pass


class Subscription:
    """A materialized view's committed changes (``Connection.subscribe``): first its rows as +I,
    then, each time its job commits, what changed: for a view with a key (GROUP BY, a PRIMARY
    KEY) -U/+U of a changed key's old and new row, +I of a new key, -D of one gone; for a view
    without one, -D of each row gone and +I of each row come. When the view's job (of this
    connection) fails, its last committed changes come first, then its error is raised."""

    def __init__(self, connection: "Connection", view: str, job: Job | None, interval: float):
        self._connection = connection
        self.view = view
        self._job = job
        #: The view's upsert key (its job's sink knows it), for -U/+U; None: -D/+I per row.
        self.key = _upsert_key(job, view) if job is not None else None
        self._interval = interval
        self._previous: pa.Table | None = None
        self._seen = None  # the checkpoint (and end) the last read was after
        self._closed = False
        self._differ: duckdb.DuckDBPyConnection | None = None  # where _diff runs, kept between commits

    def __iter__(self) -> "Subscription":
        return self

    def __next__(self) -> pa.RecordBatch:
        while not self._closed:
            if self._previous is not None and not self._wait_for_commit():
                continue
            ended = self._job is not None and self._job.done.is_set()
            current = self._read()
            if self._previous is not None and self._previous.equals(current):
                changes = None  # the same rows in the same order: nothing changed
            else:
                if self._differ is None:  # dropped with the subscription (close may come from any thread)
                    self._differ = duckdb.connect(":memory:")
                changes = _diff(self._previous, current, self.key, self._differ)
            self._previous = current
            if changes is not None and changes.num_rows:
                return changes
            if ended:
                self._closed = True
                if self._job.error is not None:  # as a stream's: the view's job failed, not finished
                    raise self._job.error
        raise StopIteration

    def _wait_for_commit(self) -> bool:
        """Wait until the view's job has committed again (or ended); True if it has. A view
        without a job in this connection is read again after ``interval`` seconds."""
        job = self._job
        if job is None:
            with self._connection._idle:
                self._connection._idle.wait(self._interval)
            return True
        if self._seen == ("end",):
            self._closed = True
            return False
        with job.changed:
            job.changed.wait_for(lambda: job.done.is_set() or job.metrics.last_checkpoint != self._seen,
                                 self._interval)
        if job.done.is_set():
            self._seen = ("end",)
            return True
        if job.metrics.last_checkpoint != self._seen:
            self._seen = job.metrics.last_checkpoint
            return True
        return False

    def _read(self) -> pa.Table:
        table = self._connection.session.database.query("SELECT * FROM \"" + self.view.replace('"', '""') + '"')
        if self._seen is None and self._job is not None:
            self._seen = self._job.metrics.last_checkpoint
        return table

    def close(self) -> None:
        self._closed = True

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _upsert_key(job: Job, view: str) -> tuple[str, ...] | None:
    """The upsert key of the sink of ``view`` in ``job``'s graph (None: the view has no key)."""
    for node in job.graph.nodes:
        if operator_class(node.kind).commits_output:
            config = node.typed_config()
            if getattr(config, "table", "").lower() == view.lower():
                return tuple(config.upsert_key) if getattr(config, "upsert_key", None) else None
    return None


def _diff(before: pa.Table | None, after: pa.Table, key: tuple[str, ...] | None = None,
          connection: duckdb.DuckDBPyConnection | None = None) -> pa.RecordBatch:
    """The changes from ``before`` to ``after`` (bags of rows, DuckDB's EXCEPT ALL: NULLs compare
    equal, duplicates count). With the view's ``key`` (an upsert key: one row per key) a key
    whose row changed gives -U (the old row) and +U (the new), a new key +I, a key gone -D, each
    key's changes together, ordered by key. Without one, each row gone is -D and each row come +I.
    In pyarrow where every column's type groups exactly as DuckDB compares (``_arrow_diff``: no
    DuckDB to start, ~30 ms of CPU saved per diff); else by DuckDB in ``connection``, an in-memory
    one kept by a caller that diffs again and again, or a new one for this diff."""
    if before is None:
        before = after.schema.empty_table()
    if before.schema.equals(after.schema) and all(map(_arrow_groups_exactly, after.schema.types)):
        return _arrow_diff(before, after, key)
    return _duckdb_diff(before, after, key, connection)


def _duckdb_diff(before: pa.Table, after: pa.Table, key: tuple[str, ...] | None,
                 connection: duckdb.DuckDBPyConnection | None) -> pa.RecordBatch:
    """``_diff`` by DuckDB (``_changes_sql``), for any column types."""
    con = connection if connection is not None else duckdb.connect(":memory:")
    try:
        con.register("before_rows", before)
        con.register("after_rows", after)
        changes = con.sql(_changes_sql(key)).to_arrow_table()
    finally:
        if connection is None:
            con.close()
        else:
            con.unregister("before_rows")
            con.unregister("after_rows")
    changes = changes.combine_chunks()
    batches = changes.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=changes.schema)


def _arrow_groups_exactly(t: pa.DataType) -> bool:
    """Values of type ``t`` are equal in pyarrow's grouping exactly when DuckDB's EXCEPT ALL has
    them equal (floats are not: DuckDB has -0.0 = 0.0 and NaN = NaN; nested types do not group)."""
    return (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_boolean(t) or pa.types.is_timestamp(t) or pa.types.is_date(t)
            or pa.types.is_decimal(t) or pa.types.is_binary(t) or pa.types.is_time(t))


def _arrow_diff(before: pa.Table, after: pa.Table, key: tuple[str, ...] | None) -> pa.RecordBatch:
    """``_diff`` in pyarrow (no DuckDB to start), for columns ``_arrow_groups_exactly``: each
    distinct row's count before and after (NULLs group together); the surplus of one side is
    gone or come. With a key, gone and come sorted together by key (NULLs first), the old row
    before the new, and a row next to one of the other side with the same key is -U/+U."""
    names = after.column_names
    side = "__weir_side"
    both = pa.concat_tables([before.append_column(side, arrow_array(np.zeros(before.num_rows, np.int64))),
                             after.append_column(side, pa.array(np.ones(after.num_rows, np.int64)))])
    counts = both.group_by(names, use_threads=False).aggregate([(side, "sum"), (side, "count")])
    came_n = counts.column(f"{side}_sum").to_numpy(zero_copy_only=False).astype(np.int64)
    gone_n = counts.column(f"{side}_count").to_numpy(zero_copy_only=False).astype(np.int64) - came_n
    surplus = gone_n - came_n
    rows = counts.select(names)
    gone = rows.take(pa.array(np.repeat(np.arange(len(surplus)), np.maximum(surplus, 0))))
    came = rows.take(pa.array(np.repeat(np.arange(len(surplus)), np.maximum(-surplus, 0))))
    changes = pa.concat_tables([gone.append_column(side, pa.array(np.zeros(gone.num_rows, np.int64))),
                                came.append_column(side, pa.array(np.ones(came.num_rows, np.int64)))])
    kinds = np.array(["-D"] * gone.num_rows + ["+I"] * came.num_rows, dtype=object)
    if key and changes.num_rows:
        # NULLs first (as DuckDB's NULLS FIRST) by sorting on each key's validity before it
        keys = pa.table({**{f"__weir_valid{i}": pc.is_valid(changes.column(k)) for i, k in enumerate(key)},
                         **{f"__weir_key{i}": changes.column(k) for i, k in enumerate(key)},
                         side: changes.column(side)})
        sort_keys = [(f"__weir_{part}{i}", "ascending") for i in range(len(key)) for part in ("valid", "key")]
        changes = changes.take(pc.sort_indices(keys, sort_keys=sort_keys + [(side, "ascending")]))
        sides = changes.column(side).to_numpy()
        same = np.ones(changes.num_rows - 1, dtype=bool)  # row i and row i + 1 have the same key
        for k in key:
            column = changes.column(k)
            a, b = column.slice(0, changes.num_rows - 1), column.slice(1)
            equal = pc.fill_null(pc.equal(a, b), False).to_numpy(zero_copy_only=False)
            nulls = pc.and_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
            same &= equal | nulls
        pair = same & (sides[:-1] == 0) & (sides[1:] == 1)  # an old row then a new one of a key
        kinds = np.where(sides == 0, "-D", "+I").astype(object)
        kinds[:-1][pair] = "-U"
        kinds[1:][pair] = "+U"
    changes = changes.drop_columns([side])
    table = pa.table([pa.array(kinds, pa.string()), *changes.columns], names=["op", *names])
    table = table.combine_chunks()
    batches = table.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _changes_sql(key: tuple[str, ...] | None) -> str:
    """The query of ``_diff``'s changes over ``before_rows`` and ``after_rows``."""
    gone = "SELECT * FROM before_rows EXCEPT ALL SELECT * FROM after_rows"
    came = "SELECT * FROM after_rows EXCEPT ALL SELECT * FROM before_rows"
    if not key:
        return (f"SELECT * EXCLUDE (__weir_after) FROM (SELECT '-D' AS op, *, 0 AS __weir_after FROM ({gone}) "
                f"UNION ALL SELECT '+I' AS op, *, 1 AS __weir_after FROM ({came})) ORDER BY __weir_after")
    quoted = ['"' + k.replace('"', '""') + '"' for k in key]

    def has_key_in(other: str, alias: str) -> str:
        match = " AND ".join(f"o.{k} IS NOT DISTINCT FROM {alias}.{k}" for k in quoted)
        return f"EXISTS (SELECT 1 FROM {other} AS o WHERE {match})"

    order = ", ".join(f"{k} NULLS FIRST" for k in quoted)
    return (f"WITH gone AS ({gone}), came AS ({came}) "
            f"SELECT * EXCLUDE (__weir_after) FROM ("
            f"SELECT CASE WHEN {has_key_in('came', 'g')} THEN '-U' ELSE '-D' END AS op, g.*, 0 AS __weir_after "
            f"FROM gone AS g UNION ALL "
            f"SELECT CASE WHEN {has_key_in('gone', 'c')} THEN '+U' ELSE '+I' END AS op, c.*, 1 AS __weir_after "
            f"FROM came AS c) ORDER BY {order}, __weir_after")


def _with_functions(method: Callable) -> Callable:
    """``method`` run with the connection's Python UDFs as the current registry
    (``engine.udfs.scope``): what it plans binds them, the jobs it starts call them."""
    @functools.wraps(method)
    def scoped(self: "Connection", *args, **kwargs):
        with udfs.scope(self.functions):
            return method(self, *args, **kwargs)
    return scoped


class Connection:
    """A session (see the module's docstring). Its Python UDFs are its own
    (``engine.udfs.FunctionRegistry``): another connection of the process may define the same
    name otherwise, and DROP FUNCTION in one leaves the other's function alone."""

    _numbers = itertools.count(1)

    def __init__(self, db: str = "weir.duckdb", settings: dict[str, str] | None = None, *,
                 state_dir: str | Path | None = None, session: Session | None = None):
        if session is None:
            root = Path(state_dir) if state_dir is not None else Path(tempfile.mkdtemp(prefix="weir-jobs-"))
            session = Session(db_path=db, settings=settings, jobs=JobManager(state_root=root))
        self.session = session
        #: The Python UDFs of this connection's statements and jobs (its session's).
        self.functions: udfs.FunctionRegistry = session.functions
        self._handles: dict[str, JobHandle] = {}
        #: Names registered from Python (``register``, ``register_sink``) -> their object's id.
        self._objects: dict[str, str] = {}
        self._idle = threading.Condition()

    # -- statements -------------------------------------------------------------------
    @_with_functions
    def execute(self, sql: str) -> Result | JobHandle | "ChangeStream" | str | None:
        """Run every statement of ``sql`` in order, as the shell does, and return the answer of
        the last one (see the module's docstring); None for empty text."""
        answer = None
        for statement in parse(sql):
            answer = self.answer(statement)
        return answer

    @_with_functions
    def answer(self, statement: st.Statement) -> Result | JobHandle | "ChangeStream" | str:
        """One parsed statement's answer as a Python value."""
        if isinstance(statement, st.Select) and self.session.reads_a_stream(statement.query):
            return self._stream(statement)
        return self._value(self.reply(statement))

    @_with_functions
    def reply(self, statement: st.Statement):
        """One parsed statement's answer as the shell shows it (``session.Reply``): what the
        shell's runner prints."""
        return self.session.execute(statement)

    def _value(self, reply) -> Result | JobHandle | str:
        if isinstance(reply, JobStarted):
            return self._handle(reply.job)
        if isinstance(reply, ResultTable):
            return Result(reply.table)
        return reply.text  # a Message: ``answer`` sends a streaming SELECT (LiveQuery) to _stream

    @_with_functions
    def sql(self, query: str) -> Result:
        """The rows of a query over the committed result tables (materialized views, result
        tables in the database), or of SHOW / DESCRIBE / SET. A query over a streaming source is
        refused: use ``stream`` for its changes."""
        statements = parse(query)
        if len(statements) != 1:
            raise WeirSqlError(Problem(f"sql() takes one statement, not {len(statements)}", 1, 1,
                                       "use execute() for a script"))
        statement = statements[0]
        if isinstance(statement, st.Select) and self.session.reads_a_stream(statement.query):
            raise WeirSqlError(Problem(
                "this query reads a streaming source, so it may never end", statement.line, statement.col,
                "use con.stream(query) for its changes as they come, or CREATE MATERIALIZED VIEW v AS ... "
                "and con.sql('SELECT ... FROM v') for its committed rows"))
        if not isinstance(statement, (st.Select, st.Show, st.Describe, st.SetOption)):
            raise WeirSqlError(Problem(f"sql() answers queries; {type(statement).__name__.upper()} "
                                       "is not one", statement.line, statement.col, "use execute() or submit()"))
        answer = self._value(self.reply(statement))
        if not isinstance(answer, Result):
            return Result(pa.table({"message": [answer]}))
        return answer

    # -- jobs -----------------------------------------------------------------------
    @_with_functions
    def submit(self, sql_or_path: str | Path, *, name: str | None = None, state_dir: Any = None,
               from_savepoint: str | Path | None = None, fresh: bool = False) -> JobHandle:
        """Plan a script (its text, or the path of a .sql file) as one job, as `weir run` plans a
        file, and start it in the background. Its CREATE TABLE and CREATE VIEW statements join
        this connection's catalog; its SET statements apply to this job only. ``state_dir``: run
        there as `weir run` does (resume, already finished); by default a new folder of the
        connection's. ``from_savepoint``: resume from a savepoint (``JobHandle.stop``)."""
        text, source_name, job_name = _script(sql_or_path, name)
        try:
            statements = parse(text, source_name=source_name)
        except WeirSqlError as error:
            error.source_name, error.text = source_name, text
            raise
        if from_savepoint is not None:  # a view stopped with this savepoint is maintained again
            for statement in statements:
                resumed = self.session.resumed_view(statement, str(from_savepoint))
                if resumed is not None:
                    self.session.catalog.drop(resumed.name)
        try:
            script = self.session.plan_job(statements, job_name)
        except WeirSqlError as error:  # the script's problems, located in its file as the shell shows them
            error.source_name, error.text = error.source_name or source_name, error.text or text
            raise
        if not script.graph.nodes:
            raise WeirSqlError(Problem("nothing to run: the script has no INSERT INTO or CREATE MATERIALIZED VIEW",
                                       1, 1, "execute() runs DDL alone"), source_name=source_name, text=text)
        if state_dir is _default_state_dir:
            state_dir = Path(".weir") / script.graph.name
        return self.start_script(script, state_dir=state_dir, from_savepoint=from_savepoint, fresh=fresh)

    @_with_functions
    def start_script(self, script: Script, *, state_dir: str | Path | None = None,
                     from_savepoint: str | Path | None = None, fresh: bool = False,
                     warn: Callable[[str], None] | None = None) -> JobHandle:
        """Start a planned script's job (``submit``'s second half; `weir run` plans its file
        itself and starts it here). ``warn``: called with what a run warns about (a restart)."""
        job = self.session.start(script.graph, "script", from_savepoint=from_savepoint or None,
                                 state_dir=Path(state_dir) if state_dir is not None else None, fresh=fresh,
                                 warn=warn)
        for view in script.materialized_views:
            self.session.maintainers[view.lower()] = job
        return self._handle(job)

    def jobs(self) -> list[JobHandle]:
        """Every job this connection started, oldest first."""
        return [self._handle(job) for job in self.session.jobs.jobs.values()]

    def _handle(self, job: Job) -> JobHandle:
        if job.id not in self._handles:
            self._handles[job.id] = JobHandle(job, self.session.jobs)
        return self._handles[job.id]

    # -- live results -------------------------------------------------------------------
    @_with_functions
    def stream(self, query: str) -> ChangeStream:
        """Run a SELECT over streaming sources as a job (parallelism 1) and iterate over its
        changes: Arrow record batches led by ``op`` ('+I', '-U', '+U', '-D')."""
        statements = parse(query)
        if len(statements) != 1 or not isinstance(statements[0], st.Select):
            raise WeirSqlError(Problem("stream() takes one SELECT", 1, 1, "use execute() for other statements"))
        statement = statements[0]
        if not self.session.reads_a_stream(statement.query):
            raise WeirSqlError(Problem(
                "this query reads no streaming source: its rows are already committed", statement.line,
                statement.col, "use con.sql(query) for its rows, or con.subscribe(view) for a view's changes"))
        return self._stream(statement)

    @_with_functions
    def _stream(self, statement: st.Select) -> ChangeStream:
        graph = self.session.plan_select(statement)
        sink = next(node for node in graph.nodes if operator_class(node.kind).commits_output)
        queue = BatchQueue(sink.output_schema)
        redirect_to(graph, queue)
        try:
            job = self.session.start(graph, "select")
        except BaseException:
            queue.close()
            raise
        return ChangeStream(self._handle(job), queue)

    def subscribe(self, view: str, *, interval: float = 1.0) -> Subscription:
        """A materialized view's changes as they are committed: its rows first (+I), then at
        each commit of its job what changed (``Subscription``: -U/+U per changed key of a keyed
        view, +I and -D for keys that came and went; -D/+I per row without a key). It ends after the job
        that maintains the view in this connection ends; a view maintained elsewhere (another
        process) is read every ``interval`` seconds until the subscription is closed."""
        job = self.session.maintainers.get(view.lower())
        if job is None and view not in self.session.database_tables() and \
                view.lower() not in {t.lower() for t in self.session.database_tables()}:
            known = ", ".join(sorted(self.session.database_tables())) or "none"
            raise WeirSqlError(Problem(f"no materialized view `{view}` in {self.session.db_path}", None, None,
                                       f"the result tables: {known}; CREATE MATERIALIZED VIEW makes one"))
        return Subscription(self, view, job, interval)

    # -- Python objects as tables -------------------------------------------------------------
    @_with_functions
    def register(self, name: str, data: Any, *, watermark: str | None = None,
                 schema: pa.Schema | None = None) -> None:
        """Make Python data the table ``name``: a pyarrow.Table or a pandas DataFrame (bounded,
        rewindable: checkpoints and savepoints resume it exactly), or an iterator of record
        batches (read once: a job over it cannot be restored or restarted; give ``schema`` or
        its first batch is read now to learn it). ``watermark``: Flink's WATERMARK FOR
        expression, e.g. "date_time - INTERVAL '2' SECOND" (the column it names is the event
        time), or a column name alone. Registering a name again replaces the data. Jobs reading
        it run at parallelism 1 (the data is in this process)."""
        data, schema = _as_source(data, schema)
        object_id = python_source.register_object(data)
        columns = [f"{_quoted(f.name)} {_sql_type(f)}" for f in schema]
        if watermark is not None:
            columns.append(f"WATERMARK FOR {_quoted(_rowtime(watermark))} AS {watermark}")
        self._declare(name, columns, object_id)

    @_with_functions
    def register_sink(self, name: str, callback: Callable[[pa.RecordBatch], None], schema: pa.Schema) -> None:
        """Make ``callback`` the table ``name`` to INSERT INTO: it is called with every batch the
        job writes (``op`` first), as it is written, in the job's thread (not transactional: after
        a restart it may see rows again)."""
        if not callable(callback):
            raise TypeError(f"register_sink wants a callable, not {type(callback).__name__}")
        object_id = python_source.register_object(callback)
        self._declare(name, [f"{_quoted(f.name)} {_sql_type(f)}" for f in schema], object_id)

    def _declare(self, name: str, columns: list[str], object_id: str) -> None:
        if name.lower() in self._objects:
            self.session.catalog.drop(name)
            python_source.forget_object(self._objects.pop(name.lower()))
        ddl = (f"CREATE TABLE {_quoted(name)} ({', '.join(columns)}) "
               f"WITH ('connector' = '{python_source.CONNECTOR}', 'object-id' = '{object_id}')")
        try:
            for statement in parse(ddl):
                self.session.execute(statement)
        except BaseException:
            python_source.forget_object(object_id)
            raise
        self._objects[name.lower()] = object_id

    # -- Python functions ----------------------------------------------------------------
    @_with_functions
    def create_function(self, name: str | None, fn: Callable, *, result_type: str | None = None,
                        input_types: list[str] | None = None, func_type: str = "general") -> None:
        """Make ``fn`` the SQL function ``name`` (None: the function's own name) for this
        connection's statements, as CREATE FUNCTION does for a module's function: a ``@weir.udf``
        function, or a plain one with ``result_type`` (and ``func_type="arrow"`` when it takes
        pyarrow arrays). A function defined in ``__main__`` (a notebook, a script) runs at
        parallelism 1; worker processes import a module's function by name. An aggregate
        function is a class with Flink's methods (``engine.udafs``): ``@weir.udaf``-declared, an
        instance of one, or a plain class with ``result_type``."""
        register_function(self.session.catalog, fn, name, result_type=result_type, input_types=input_types,
                          func_type=func_type)

    # -- the end ---------------------------------------------------------------------
    def close(self) -> None:
        """Cancel the jobs still running and wait for their threads."""
        self.session.jobs.cancel_all()
        self.session.jobs.join_all()
        for object_id in self._objects.values():
            python_source.forget_object(object_id)
        self._objects.clear()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _script(sql_or_path: str | Path, name: str | None) -> tuple[str, str | None, str]:
    """(text, source name for errors, job name) of ``submit``'s argument."""
    if isinstance(sql_or_path, Path) or (str(sql_or_path).strip().endswith(".sql") and "\n" not in str(sql_or_path)
                                         and ";" not in str(sql_or_path)):
        path = Path(sql_or_path)
        try:
            return path.read_text(), str(path), name or default_job_name(path)
        except OSError as error:
            raise EngineError(f"cannot read {path}: {error.strerror}", hint="give a .sql file's path or SQL text") from None
    return str(sql_or_path), None, name or "job"


def _as_source(data: Any, schema: pa.Schema | None) -> tuple[pa.Table | Iterator[pa.RecordBatch], pa.Schema]:
    if type(data).__module__.split(".")[0] == "pandas":
        data = pa.Table.from_pandas(data, preserve_index=False)
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return data, data.schema
    if isinstance(data, pa.RecordBatchReader):
        return iter(data), schema or data.schema
    if isinstance(data, Iterable) and not isinstance(data, (str, bytes, dict)):
        batches = iter(data)
        if schema is None:
            try:
                first = next(batches)
            except StopIteration:
                raise ValueError("the iterator is empty: give schema= to register it") from None
            schema = first.schema
            batches = itertools.chain([first], batches)
        return batches, schema
    raise TypeError(f"register takes a pyarrow.Table, a pandas DataFrame or an iterator of pyarrow record "
                    f"batches, not {type(data).__name__}")


def _sql_type(field: pa.Field) -> str:
    """The SQL type a registered Arrow column is declared with."""
    t = field.type
    if pa.types.is_timestamp(t):
        return "TIMESTAMP(3)" if t.unit in ("s", "ms") else "TIMESTAMP(6)"
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "VARCHAR"
    name = sql_name(t)
    if name == "BYTES":
        return "VARBINARY"
    if name == str(t).upper():
        raise TypeError(f"column `{field.name}` has the Arrow type {t}, which weir has no SQL type for: "
                        "use integers, floating point, decimal, string, bool, date or timestamp columns")
    return name


def _rowtime(watermark: str) -> str:
    """The event-time column a WATERMARK FOR expression is about: the column it names."""
    try:
        expression = sqlglot.parse_one(watermark)
    except sqlglot.errors.ParseError as error:
        raise WeirSqlError(Problem(f"cannot read the watermark expression {watermark!r}: {error.errors[0]['description']}",
                                   None, None, "e.g. \"date_time - INTERVAL '2' SECOND\"")) from None
    column = expression if isinstance(expression, exp.Column) else expression.find(exp.Column)
    if column is None:
        raise WeirSqlError(Problem(f"the watermark expression {watermark!r} names no column", None, None,
                                   "e.g. \"date_time - INTERVAL '2' SECOND\", on the table's timestamp column"))
    return column.name


def _quoted(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"

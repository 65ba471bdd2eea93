"""Python user-defined scalar functions, called by DuckDB inside weir's SQL.

A UDF is a Python function wrapped by ``@weir.udf(result_type=...)``:

- ``func_type="general"`` (the default, as in PyFlink): a function of Python values, one row at
  a time (``None`` for NULL); weir calls it over each chunk of rows with ``map`` and builds the
  result array.
- ``func_type="arrow"``: a function of ``pyarrow.Array`` arguments returning an array (or a
  ChunkedArray) of the same length; weir calls it once per chunk. It plays the part of PyFlink's
  ``"pandas"`` UDF (``array.to_pandas()`` gives the Series).

How a UDF reaches the engine:

1. The planner resolves a UDF (``CREATE FUNCTION f AS 'pkg.mod.f'`` imports ``pkg.mod``) and
   ``install``\\ s it in the current registry (``FunctionRegistry``: each ``weir.connect()`` has
   its own), so that plan-time DuckDB connections can bind it.
2. The JobGraph carries the functions its SQL calls as ``FunctionSpec`` JSON (name, module,
   qualname, result type, func type, input types); every process that runs the graph (a worker,
   a restarted job) calls ``install_specs``, which imports each module by name.
3. Every DuckDB connection an operator evaluates SQL on calls ``register_functions(con)``:
   DuckDB's ``create_function(..., type="arrow", null_handling="special")``. Without declared
   ``input_types`` a parameter is DuckDB's ANY: the argument keeps the call site's type.
4. An exception in a UDF is recorded with the function's name, the first failing row's values
   (the chunk re-run row by row) and the traceback (``take_failure``); the operator's DuckDB
   error becomes an ``EngineError`` saying so (``engine.operators.duckdb_sql``).
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import inspect
import itertools
import os
import re
import sys
import threading
import traceback
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import duckdb
import pyarrow as pa

from weir.engine import duckdb_tree
from weir.engine.errors import EngineError

#: weir's func types; "pandas" (PyFlink's) is refused with a hint to use "arrow".
FUNC_TYPES = ("general", "arrow")

#: Flink's type names DuckDB spells otherwise.
_FLINK_TYPES = {"STRING": "VARCHAR", "BYTES": "BLOB", "TIMESTAMP_LTZ": "TIMESTAMPTZ"}


class UdfError(EngineError):
    """A UDF that cannot be defined, imported or called as declared."""

    #: The call that failed (``UdfFailure``), when the error is about one.
    failure: "UdfFailure | None" = None


def duckdb_type(written: str) -> str:
    """``written`` (a Flink or DuckDB SQL type) as DuckDB names it; UdfError when it is no type.
    TIMESTAMP(p) is TIMESTAMP (weir's timestamps are µs), STRING is VARCHAR."""
    text = " ".join(str(written).split()).upper()
    text = re.sub(r"^(TIMESTAMP(?:_LTZ)?)\s*\(\s*\d\s*\)", r"\1", text)
    text = re.sub(r"^VARCHAR\s*\(\s*\d+\s*\)$", "VARCHAR", text)
    text = _FLINK_TYPES.get(text, text)
    try:
        return str(duckdb.sqltype(text))
    except (duckdb.Error, RuntimeError, TypeError) as exc:
        raise UdfError(f"{written!r} is not a SQL type",
                       hint="write a type such as BIGINT, INT, DOUBLE, BOOLEAN, STRING, DECIMAL(10, 2), "
                            "TIMESTAMP(3)") from exc


_ARROW_TYPES: dict[str, pa.DataType] = {}


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type DuckDB gives a value of ``sql_type``."""
    if sql_type not in _ARROW_TYPES:
        con = duckdb.connect(":memory:")
        try:
            _ARROW_TYPES[sql_type] = con.sql(f"SELECT CAST(NULL AS {sql_type}) AS v").to_arrow_table().schema[0].type
        finally:
            con.close()
    return _ARROW_TYPES[sql_type]


@dataclass(frozen=True)
class FunctionSpec:
    """What a JobGraph carries of a UDF: enough for another process to import and register it."""

    name: str
    module: str
    qualname: str
    result_type: str
    func_type: str = "general"
    #: DuckDB types of the parameters; None: each parameter takes the call site's type (ANY).
    input_types: tuple[str, ...] | None = None
    deterministic: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "module": self.module, "qualname": self.qualname,
                "result_type": self.result_type, "func_type": self.func_type,
                "input_types": list(self.input_types) if self.input_types is not None else None,
                "deterministic": self.deterministic}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "FunctionSpec":
        types = data.get("input_types")
        return cls(data["name"], data["module"], data["qualname"], data["result_type"],
                   data.get("func_type", "general"), tuple(types) if types is not None else None,
                   data.get("deterministic", True))


class ScalarFunction:
    """A Python function declared as a weir UDF (``udf``). Calling it calls the function."""

    def __init__(self, fn: Callable, *, result_type: str, input_types=None, func_type: str = "general",
                 name: str | None = None, deterministic: bool = True):
        if not callable(fn):
            raise UdfError(f"weir.udf needs a function, got {type(fn).__name__}",
                           hint="decorate a function: @weir.udf(result_type='BIGINT')")
        if func_type not in FUNC_TYPES:
            hint = ("weir's vectorised UDFs take pyarrow arrays: func_type='arrow' (array.to_pandas() "
                    "gives a Series)") if func_type == "pandas" else "use func_type='general' or 'arrow'"
            raise UdfError(f"func_type {func_type!r} is not supported", hint=hint)
        if result_type is None:
            raise UdfError(f"the UDF {getattr(fn, '__name__', fn)} needs a result_type",
                           hint="declare it: @weir.udf(result_type='BIGINT')")
        if _takes_no_argument(fn):
            raise UdfError(f"the UDF {getattr(fn, '__name__', fn)} takes no argument",
                           hint="a UDF is called over rows: give it at least one parameter")
        self.fn = fn
        self.name = name or fn.__name__
        self.result_type = duckdb_type(result_type)
        self.input_types = tuple(duckdb_type(t) for t in input_types) if input_types is not None else None
        self.func_type = func_type
        self.deterministic = deterministic
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<weir udf {self.name}: {self.func_type} -> {self.result_type}>"

    def spec(self, name: str | None = None) -> FunctionSpec:
        return FunctionSpec(name or self.name, self.fn.__module__, self.fn.__qualname__, self.result_type,
                            self.func_type, self.input_types, self.deterministic)


def _takes_no_argument(fn: Callable) -> bool:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: DuckDB will say
        return False
    return not any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def udf(fn: Callable | None = None, *, result_type: str | None = None, input_types=None,
        func_type: str = "general", name: str | None = None, deterministic: bool = True):
    """Declare a scalar UDF: ``@weir.udf(result_type="BIGINT")`` or ``weir.udf(f, result_type=...)``.
    ``func_type``: "general" (Python values, a row at a time; the default, as PyFlink's) or "arrow"
    (pyarrow arrays). ``input_types``: the parameters' SQL types (arguments are cast to them);
    without them each argument keeps its type at the call site."""
    def wrap(f: Callable) -> ScalarFunction:
        return ScalarFunction(f, result_type=result_type, input_types=input_types, func_type=func_type,
                              name=name, deterministic=deterministic)

    return wrap(fn) if fn is not None else wrap


# -- importing -------------------------------------------------------------------------------------


def resolve(module: str, qualname: str, *, what: str | None = None) -> ScalarFunction:
    """The UDF ``module``.``qualname``, imported. A UdfError names what failed and the fix."""
    what = what or f"{module}.{qualname}"
    if module in ("__main__", "__mp_main__"):
        main = importlib.import_module("__main__")
        if getattr(main, "__file__", None) is None or _attribute(main, qualname) is None:
            raise UdfError(f"the Python function {what} is defined in __main__ (a notebook or an interactive "
                           "session), which another process cannot import",
                           hint="move it into a module on the Python path (my_udfs.py) and register it from "
                                "there, or run the job at parallelism 1")
    if os.getcwd() not in sys.path:  # as `python -m` does: a job's my_udfs.py beside it imports
        sys.path.append(os.getcwd())
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to see
        raise UdfError(f"cannot import the module {module!r} of the function {what}: "
                       f"{type(exc).__name__}: {exc}",
                       hint=f"make {module} importable (on PYTHONPATH or installed) in every process that "
                            "runs the job") from exc
    value = _attribute(loaded, qualname)
    if value is None:
        raise UdfError(f"the module {module!r} has no attribute {qualname!r}",
                       hint=f"check the name after the last dot in '{module}.{qualname}'")
    if isinstance(value, ScalarFunction):
        return value
    if callable(value):
        raise UdfError(f"{what} is not a weir UDF: a plain function has no result type",
                       hint=f"decorate it in {module}: @weir.udf(result_type='BIGINT') "
                            f"(func_type='arrow' for a function of pyarrow arrays)")
    raise UdfError(f"{what} is a {type(value).__name__}, not a weir UDF",
                   hint="name a function decorated with @weir.udf(result_type=...)")


def _attribute(obj: Any, qualname: str) -> Any:
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def load(target: str) -> ScalarFunction:
    """The UDF named by ``'package.module.attribute'`` (CREATE FUNCTION's AS string)."""
    module, dot, attribute = target.strip().rpartition(".")
    if not dot or not module or not attribute:
        raise UdfError(f"'{target}' does not name a module and a function",
                       hint="write the full path: CREATE FUNCTION f AS 'my_package.my_module.f' LANGUAGE PYTHON")
    return resolve(module, attribute, what=target)


# -- registries: the functions a session (and its jobs) call --------------------------------------


@dataclass
class _Installed:
    spec: FunctionSpec
    function: ScalarFunction
    callback: Callable


#: Every registry change takes the next number: a connection that cached a registry's functions
#: (``version``) sees that another registry, or a change of the same one, is current now.
_VERSIONS = itertools.count(1)
_LOCK = threading.Lock()


class FunctionRegistry:
    """The Python UDFs callable by name on the DuckDB connections of one session: each
    ``weir.connect()`` has its own, so that two connections of one process may define the
    same name differently, and one's DROP FUNCTION leaves the other's alone. The registry in
    use is the current context's (``scope``); a job's thread starts in a copy of the context
    that started it (``shell.jobs``), so the job's operators register its session's functions.
    Code that enters no scope (a planner used alone, a worker process) shares ``PROCESS``."""

    def __init__(self) -> None:
        self.entries: dict[str, _Installed] = {}
        #: The session's table functions (``engine.udtfs``: called by LATERAL TABLE, not by DuckDB).
        self.table_functions: dict[str, Any] = {}
        self.version = next(_VERSIONS)

    def put(self, spec: FunctionSpec, function: ScalarFunction) -> None:
        with _LOCK:
            self.entries[spec.name.lower()] = _Installed(spec, function, _callback(spec, function))
            self.version = next(_VERSIONS)

    def remove(self, name: str) -> None:
        with _LOCK:
            self.entries.pop(name.lower(), None)
            self.version = next(_VERSIONS)

    def get(self, name: str) -> _Installed | None:
        return self.entries.get(name.lower())

    def __repr__(self) -> str:
        return f"<weir FunctionRegistry: {', '.join(sorted(self.entries)) or 'no functions'}>"


#: The registry of code outside any connection's scope.
PROCESS = FunctionRegistry()
_CURRENT: contextvars.ContextVar[FunctionRegistry] = contextvars.ContextVar("weir_udf_registry", default=PROCESS)


def current() -> FunctionRegistry:
    """The registry in use in this context (``PROCESS`` outside every ``scope``)."""
    return _CURRENT.get()


@contextlib.contextmanager
def scope(registry: FunctionRegistry) -> Iterator[FunctionRegistry]:
    """Make ``registry`` the one ``install``, ``installed`` and ``register_functions`` use here."""
    token = _CURRENT.set(registry)
    try:
        yield registry
    finally:
        _CURRENT.reset(token)


def version() -> int:
    """The current registry's version: a number no other registry state has."""
    return current().version


def install(function: ScalarFunction, name: str | None = None) -> FunctionSpec:
    """Make ``function`` callable as ``name`` on the DuckDB connections of the current registry."""
    spec = function.spec(name)
    current().put(spec, function)
    return spec


def install_specs(specs: list[FunctionSpec] | list[dict]) -> None:
    """Install the functions a JobGraph carries, as it declares them, in the current registry:
    the function the registry (or, for one planned outside any scope, ``PROCESS``) has under the
    same declaration, else imported by module and name (a worker process, a restart)."""
    registry = current()
    for spec in specs:
        spec = FunctionSpec.from_json(spec) if isinstance(spec, dict) else spec
        here = registry.get(spec.name)
        if here is not None and here.spec == spec:
            continue
        planned = PROCESS.get(spec.name)
        function = planned.function if planned is not None and planned.spec == spec else \
            resolve(spec.module, spec.qualname, what=spec.name)
        registry.put(spec, function)


def uninstall(name: str) -> None:
    current().remove(name)


def arity_problem(name: str, count: int) -> str | None:
    """Why the installed UDF ``name`` cannot take ``count`` arguments (None: it can)."""
    entry = current().get(name)
    if entry is None:
        return None
    if entry.spec.input_types is not None:
        expected = len(entry.spec.input_types)
        return None if count == expected else f"{entry.spec.name} takes {expected} argument(s), got {count}"
    try:
        inspect.signature(entry.function.fn).bind(*range(count))
    except TypeError as reason:
        return f"{entry.spec.name} cannot take {count} argument(s): {reason}"
    except ValueError:  # no signature to check
        return None
    return None


def installed(name: str) -> FunctionSpec | None:
    entry = current().get(name)
    return entry.spec if entry is not None else None


#: The UDF names registered on each DuckDB connection, to take back those no longer current.
_ON_CONNECTION: "weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, set[str]]" = weakref.WeakKeyDictionary()


def register_functions(con: duckdb.DuckDBPyConnection, names=None) -> None:
    """Register the current registry's UDFs (or those of ``names``) on ``con``; a UDF an earlier
    call registered there that the registry no longer has (another session's, a dropped one) is
    removed."""
    with _LOCK:
        entries = [e for key, e in current().entries.items() if names is None or key in names]
        before = _ON_CONNECTION.get(con, set())
        _ON_CONNECTION[con] = {e.spec.name for e in entries}
    for name in before - {e.spec.name for e in entries}:
        try:
            con.remove_function(name)
        except duckdb.Error:
            pass
    for entry in entries:
        spec = entry.spec
        params = list(spec.input_types) if spec.input_types is not None else None
        try:
            con.remove_function(spec.name)
        except duckdb.Error:
            pass
        con.create_function(spec.name, entry.callback, params, spec.result_type, type="arrow",
                            null_handling="special", side_effects=not spec.deterministic)


# -- calling, and failing --------------------------------------------------------------------------


@dataclass
class UdfFailure:
    name: str
    #: The first failing row's argument values.
    values: tuple
    error: str
    traceback: str

    #: The error itself when weir raised it (a result of the wrong type).
    raised: UdfError | None = None
    #: The values of the group key of the row, for an aggregate function (``engine.udafs``).
    key: tuple | None = None
    #: An aggregate function's method that raised (``engine.udafs``): a row ``accumulate`` or
    #: ``retract`` raises on in a GROUP BY can be kept as a bad row; ``merge`` and ``get_value``
    #: fail on accumulators, no row.
    method: str | None = None
    #: False when 'python.udf.bad-rows.table' cannot keep this failure's row (``merge``,
    #: ``get_value``, ``create_accumulator``; ``retract`` in an OVER): the hint says the job fails anyway.
    keepable: bool = True

    def engine_error(self, operator_id: str | None) -> "UdfError":
        """The error that fails the job; it carries this failure (``error.failure``), so that an
        operator keeping bad rows (``engine.operators.late_rows.BadRows``) can tell the function's
        own exception from weir's."""
        if self.raised is not None:
            error = UdfError(self.raised.message, hint=self.raised.hint, operator_id=operator_id)
        else:
            values = ", ".join(repr(v) for v in self.values)
            of = {"merge": "the accumulators", "get_value": "the accumulator"}.get(self.method, "the row")
            row = f"{of} ({values})" if self.values else "a chunk of rows (each row alone succeeds)"
            if self.key:
                row += f" of the group with the key ({', '.join(repr(v) for v in self.key)})"
            keep = "keep such rows in a table with SET 'python.udf.bad-rows.table' = 'udf_bad_rows'"
            if not self.keepable:
                if self.method in ("create_accumulator", "merge", "get_value"):
                    why = "it fails on accumulators, not on an input row that could be kept"
                elif self.method == "retract":
                    why = ("the row leaving an OVER frame was counted in the frames before: only a row "
                           "accumulate raises on can be left out of an OVER aggregate")
                else:
                    why = "this operator cannot leave the row out"
                keep = f"note that a failure in {self.method} fails the job even with 'python.udf.bad-rows.table' ({why})"
            error = UdfError(f"the Python function {self.name} failed on {row}: {self.error}",
                             hint=f"fix the function or filter such rows out before calling it, or {keep}; "
                                  f"its traceback:\n{self.traceback.rstrip()}",
                             operator_id=operator_id)
        error.failure = self
        return error


_FAILURES: list[UdfFailure] = []


def take_failure() -> UdfFailure | None:
    """The last UDF failure of this process (and forget it)."""
    with _LOCK:
        failure = _FAILURES[-1] if _FAILURES else None
        _FAILURES.clear()
    return failure


def _record(name: str, values: tuple, exc: BaseException, key: tuple | None = None,
            method: str | None = None, keepable: bool = True) -> None:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    with _LOCK:
        _FAILURES[:] = [UdfFailure(name, values, f"{type(exc).__name__}: {exc}", text,
                                   exc if isinstance(exc, UdfError) else None, key, method, keepable)]


def _callback(spec: FunctionSpec, function: ScalarFunction) -> Callable:
    fn, name = function.fn, spec.name
    result = arrow_type(spec.result_type)

    def arrays_of(columns) -> list[pa.Array]:
        return [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]

    def first_failure(columns: list[pa.Array], call_row: Callable) -> None:
        rows = [c.to_pylist() for c in columns]
        for i, values in enumerate(zip(*rows)):
            try:
                call_row(i, values)
            except Exception as exc:  # noqa: BLE001
                _record(name, values, exc)
                return

    if function.func_type == "arrow":
        def call_arrays(*columns):
            arrays = arrays_of(columns)
            try:
                out = fn(*arrays)
            except Exception as exc:
                _record(name, tuple(), exc)  # the whole chunk; narrowed to its first failing row:
                first_failure(arrays, lambda i, values: fn(*(a.slice(i, 1) for a in arrays)))
                raise
            try:
                return _conform(out, len(arrays[0]) if arrays else None, result, name)
            except UdfError as error:
                _record(name, (), error)
                raise
        return call_arrays

    def call_rows(*columns):
        arrays = arrays_of(columns)
        try:
            out = list(map(fn, *(a.to_pylist() for a in arrays)))
        except Exception:
            first_failure(arrays, lambda i, values: fn(*values))
            raise
        try:
            return pa.array(out, type=result)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            bad = next((v for v in out if _not_of(v, result)), None)
            error = UdfError(f"the Python function {name} returned {bad!r}, not a {spec.result_type}",
                             hint=f"return values of its result_type {spec.result_type} (or None)")
            _record(name, (), error)
            raise error from exc
    return call_rows


def _not_of(value, result: pa.DataType) -> bool:
    try:
        pa.array([value], type=result)
        return False
    except (pa.ArrowException, TypeError, ValueError):
        return True


def _conform(out, length: int | None, result: pa.DataType, name: str):
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    if not isinstance(out, pa.Array):
        try:
            out = pa.array(out, type=result)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise UdfError(f"the arrow UDF {name} returned a {type(out).__name__}, not an array",
                           hint="return a pyarrow array as long as its arguments") from exc
    if length is not None and len(out) != length:
        raise UdfError(f"the arrow UDF {name} returned {len(out)} values for {length} rows",
                       hint="return one value per row of its arguments")
    if out.type != result:
        try:
            out = out.cast(result)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            raise UdfError(f"the arrow UDF {name} returned {out.type} values that are not {result}: {exc}",
                           hint="return an array of its result_type (pyarrow.compute.cast converts one)") from exc
    return out


def record_failure(name: str, values: tuple, exc: BaseException, key: tuple | None = None,
                   method: str | None = None, keepable: bool = True) -> None:
    """Record a failure of the Python function ``name`` (a UDAF's ``method``: ``engine.udafs``) on the
    row ``values`` (of the group ``key``), for ``take_failure``; ``keepable``: whether the bad-rows
    setting could keep its row."""
    _record(name, values, exc, key, method, keepable)


# -- catching: every raising row of a batch in one statement (the bad-rows setting) ----------------

CATCH_PREFIX = "__weir_catch_"
#: Statements rewritten by ``catching``: (sql, row column, UDF names) -> the rewritten SQL.
_CAUGHT: dict[tuple[str, str, frozenset], str] = {}


def catching(con: duckdb.DuckDBPyConnection, sql: str, row_column: str) -> tuple[str, dict[int, UdfFailure]]:
    """``sql`` with each call of a current UDF ``f(args)`` turned into ``__weir_catch_f(<row_column>, args)``,
    registered on ``con``: the function called row by row where a chunk raised, NULL where a row raised,
    each raising row's first failure kept by its number (``row_column``, the input row's) in the dict
    returned beside the SQL. One statement then finds every raising row of a batch
    (``engine.operators.late_rows.BadRows``). weir's own complaint (a result of the wrong type) still raises.
    The calls are found in DuckDB's own parse tree of the statement (``caught_sql``), never in its text."""
    entries = dict(current().entries)
    failures: dict[int, UdfFailure] = {}
    rewritten = caught_sql(con, sql, row_column, frozenset(entries))
    for key, entry in entries.items():
        spec = entry.spec
        params = ["BIGINT", *spec.input_types] if spec.input_types is not None else None
        try:
            con.remove_function(CATCH_PREFIX + key)
        except duckdb.Error:
            pass
        con.create_function(CATCH_PREFIX + key, _catching_callback(spec, entry.function, failures), params,
                            spec.result_type, type="arrow", null_handling="special",
                            side_effects=not spec.deterministic)
    return rewritten, failures


def caught_sql(con: duckdb.DuckDBPyConnection, sql: str, row_column: str, names: frozenset) -> str:
    """The SELECT ``sql`` with every call of a function in ``names`` (lower case, unqualified)
    given the catching name and ``row_column`` as its first argument: DuckDB parses it
    (``json_serialize_sql``), the tree's FUNCTION nodes are rewritten, and DuckDB writes it back
    (``json_deserialize_sql``), so that string literals, quoted names, comments and lambdas are
    DuckDB's to read. A UdfError when DuckDB cannot parse it (``BadRows`` then splits the batch)."""
    key = (sql, row_column, names)
    if key not in _CAUGHT:
        tree = _parsed(con, sql)
        column = duckdb_tree.expression(con, duckdb_tree.quote(row_column))
        _rewrite_calls(tree, names, column)
        if len(_CAUGHT) > 256:
            _CAUGHT.clear()
        _CAUGHT[key] = duckdb_tree.write(con, tree)
    return _CAUGHT[key]


def _parsed(con: duckdb.DuckDBPyConnection, sql: str) -> dict:
    try:
        return duckdb_tree.parse(con, sql)
    except duckdb_tree.UnparsedSql as exc:
        raise UdfError(f"cannot find the Python UDF calls of a statement DuckDB does not parse as a SELECT: "
                       f"{exc}") from exc


def _rewrite_calls(node: Any, names: frozenset, column: dict) -> None:
    if isinstance(node, list):
        for item in node:
            _rewrite_calls(item, names, column)
        return
    if not isinstance(node, dict):
        return
    if (node.get("class") == "FUNCTION" and not node.get("is_operator") and not node.get("schema")
            and not node.get("catalog") and str(node.get("function_name", "")).lower() in names):
        name = CATCH_PREFIX + node["function_name"].lower()
        node["function_name"] = name
        if "qualified_name" in node:
            node["qualified_name"] = {**node["qualified_name"], "path": [name]}
        if "arguments" in node:  # DuckDB 2.0: named arguments
            node["arguments"] = [{"name": "", "expression": dict(column)}, *node["arguments"]]
        else:
            node["children"] = [dict(column), *node["children"]]
    for value in node.values():
        _rewrite_calls(value, names, column)


def _catching_callback(spec: FunctionSpec, function: ScalarFunction, failures: dict[int, UdfFailure]) -> Callable:
    fn, name, result = function.fn, spec.name, arrow_type(spec.result_type)

    def failed(row: int, values: tuple, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        failures.setdefault(row, UdfFailure(name, values, f"{type(exc).__name__}: {exc}", text))

    def call(rows, *columns):
        arrays = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
        rows = rows.combine_chunks() if isinstance(rows, pa.ChunkedArray) else rows
        try:  # the whole chunk first: most chunks of a failing batch raise nowhere
            if function.func_type == "arrow":
                return _conform(fn(*arrays), len(rows), result, name)
            out = list(map(fn, *(a.to_pylist() for a in arrays)))
        except UdfError:
            raise
        except Exception:  # noqa: BLE001 - the user's exception: find its rows
            out = []
            values = list(zip(*(a.to_pylist() for a in arrays)))
            for i, row in enumerate(rows.to_pylist()):
                try:
                    value = fn(*(a.slice(i, 1) for a in arrays)) if function.func_type == "arrow" else fn(*values[i])
                except Exception as exc:  # noqa: BLE001
                    failed(row, values[i], exc)
                    value = None
                else:
                    if function.func_type == "arrow":
                        value = _conform(value, 1, result, name)[0].as_py()
                out.append(value)
        try:
            return pa.array(out, type=result)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            bad = next((v for v in out if _not_of(v, result)), None)
            raise UdfError(f"the Python function {name} returned {bad!r}, not a {spec.result_type}",
                           hint=f"return values of its result_type {spec.result_type} (or None)") from exc
    return call

"""Python user-defined aggregate functions (Flink's ``AggregateFunction``), kept in DuckDB state.

A UDAF is a class with Flink's methods::

    @weir.udaf(result_type="BIGINT")
    class PySum:
        def create_accumulator(self): return [0]
        def accumulate(self, acc, v): acc[0] += v or 0          # a row at a time, or:
        def accumulate_batch(self, acc, v: pa.Array): ...       # the rows of one group, as arrays
        def retract(self, acc, v): acc[0] -= v or 0             # (or retract_batch) for updating input
        def merge(self, acc, others): acc[0] += sum(o[0] for o in others)
        def get_value(self, acc): return acc[0]

``@weir.udaf`` on a class returns the class itself with its declaration attached
(``__weir_udaf__``), so that it stays a class that pickles and instantiates as usual;
``weir.udaf(MyAgg, ...)`` or ``weir.udaf(MyAgg(), ...)`` returns the declaration
(``AggregateUdf``) for ``Connection.create_function``. Every process that runs the job imports the
class by module and name and instantiates it with no arguments. Accumulators are mutated in
place, as in Flink (a list or an object, not an int). ``accumulate_batch(acc, *arrays)`` and
``retract_batch(acc, *arrays)``, where the class defines them, are called once per group of a
batch with its rows' arguments as ``pyarrow.Array`` slices (zero-copy), instead of a call per row.

How the operators keep a UDAF (``PythonAccumulator``, beside the built-in ``Accumulator``):

1. The planner puts a ``PythonAggregateSpec`` on the call's ``AggregateCall.python``. The operator
   resolves it (``PythonAggregate``) and registers five DuckDB scalar functions of its own on its
   state connection (``register``), named ``__weir_udaf_<name>_<role>``.
2. A window or session aggregate groups a batch's rows per (key, slice) in SQL as it does for the
   built-ins, with ``<accumulate>(list(argument) FILTER (WHERE ...))``: one Python call per chunk
   of groups, which creates an accumulator per group, accumulates the group's rows and returns it
   pickled. The accumulators are a BLOB column of ``window_accumulators`` (or
   ``session_accumulators``), keyed by key group like every partial, so snapshots, rescaling and
   two-phase aggregation treat them as any other column.
3. Partials meet (compaction, a firing window's slices, merged sessions, the global phase) in
   ``<merge>(list(column))``: Flink's ``merge(acc, others)``; a firing calls ``<value>``
   (``get_value``) on the merged accumulator.
4. The group aggregate keeps one pickled accumulator per key; a batch's signed rows per key, in
   arrival order, are ``list({s: sign, v: argument} ORDER BY seq)``, and ``<apply>(state, rows)``
   accumulates +I/+U rows and retracts -U/-D rows (runs of one sign go to the ``_batch`` methods
   at once).
5. An exception in a method is recorded with the function's name, the method, the failing row's
   values, its group key (the operators pass ``key_sql`` of their key columns as a last argument
   of ``<accumulate>`` and ``<apply>``) and the traceback (``udfs.record_failure``); the operator's DuckDB error becomes an
   ``EngineError`` saying so, as for scalar UDFs.
6. The OVER aggregate keeps one pickled accumulator per partition key (``over_accumulators``)
   and slides it over each firing's frames in ``over_frames`` (no DuckDB function: the operator
   reads the rows of its keys as Arrow lists, one list per key): per frame it retracts the rows
   leaving it, accumulates the rows entering it (array slices to the ``_batch`` methods) and
   calls ``get_value``.
"""
from __future__ import annotations

import importlib
import inspect
import os
import pickle
import sys
from dataclasses import dataclass
from typing import Any, Callable

import duckdb
import numpy as np
import pyarrow as pa

from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.pandas_import import numpy_values
from weir.engine.udfs import UdfError, UdfFailure, arrow_type, duckdb_type, record_failure, take_failure

#: The methods every UDAF has; one of each pair at least.
REQUIRED = ("create_accumulator", "get_value")
ACCUMULATE = ("accumulate", "accumulate_batch")
RETRACT = ("retract", "retract_batch")
#: The attribute ``@weir.udaf`` attaches to a class.
DECLARATION = "__weir_udaf__"
PICKLE_PROTOCOL = 5


@dataclass(frozen=True)
class PythonAggregateSpec(OperatorConfig):
    """What an ``AggregateCall`` carries of a UDAF: enough for another process to import it."""

    name: str
    module: str
    qualname: str
    #: DuckDB type SQL of ``get_value``'s result.
    result_type: str
    #: How many arguments the call passes (more than one: the argument is a struct a0, a1, ...).
    arity: int = 1
    retracts: bool = optional(False)
    merges: bool = optional(False)


class AggregateUdf:
    """A Python class declared as a weir aggregate function (``udaf``)."""

    def __init__(self, function: Any, *, result_type: str | None, accumulator_type: str | None = None,
                 name: str | None = None):
        if inspect.isroutine(function):
            raise UdfError(f"weir.udaf declares aggregate functions: a class with create_accumulator, accumulate "
                           f"and get_value methods, not the function {getattr(function, '__name__', function)}",
                           hint="write the aggregate as a class (Flink's AggregateFunction), or declare a scalar "
                                "function with @weir.udf")
        cls = function if inspect.isclass(function) else type(function)
        missing = [m for m in REQUIRED if not callable(getattr(cls, m, None))]
        if not any(callable(getattr(cls, m, None)) for m in ACCUMULATE):
            missing.append("accumulate")
        if missing:
            raise UdfError(f"the aggregate function {cls.__name__} has no {', '.join(missing)} method",
                           hint="an aggregate function defines create_accumulator(), accumulate(acc, *args) "
                                "(or accumulate_batch(acc, *arrays)) and get_value(acc); retract for an "
                                "updating input, merge for windows")
        if result_type is None and callable(getattr(cls, "get_result_type", None)):
            result_type = _declared_type(cls)
        if result_type is None:
            raise UdfError(f"the aggregate function {cls.__name__} needs a result_type",
                           hint="declare it: @weir.udaf(result_type='BIGINT')")
        self.cls = cls
        self.name = name or cls.__name__
        self.result_type = duckdb_type(result_type)
        #: Informational (Flink's accumulator type): accumulators are pickled whatever it is.
        self.accumulator_type = accumulator_type
        self.retracts = any(callable(getattr(cls, m, None)) for m in RETRACT)
        self.merges = callable(getattr(cls, "merge", None))
        self.__doc__ = cls.__doc__

    def __repr__(self) -> str:
        return f"<weir udaf {self.name}: {self.cls.__qualname__} -> {self.result_type}>"

    def spec(self, name: str | None = None, arity: int = 1) -> PythonAggregateSpec:
        return PythonAggregateSpec(name or self.name, self.cls.__module__, self.cls.__qualname__, self.result_type,
                                   arity, self.retracts, self.merges)


def _declared_type(cls: type) -> str | None:
    try:
        declared = cls().get_result_type()
    except Exception:  # noqa: BLE001 - PyFlink's DataTypes, or a constructor with arguments
        return None
    return declared if isinstance(declared, str) else None


def udaf(function: Any = None, *, result_type: str | None = None, accumulator_type: str | None = None,
         name: str | None = None):
    """Declare an aggregate function: ``@weir.udaf(result_type="BIGINT")`` on a class (returns the
    class, declared), or ``weir.udaf(MyAgg, result_type=...)`` / ``weir.udaf(MyAgg(), ...)``
    (returns the ``AggregateUdf``). ``accumulator_type`` is accepted as in PyFlink; accumulators
    are pickled whatever it says."""
    if function is not None and not inspect.isclass(function):
        return AggregateUdf(function, result_type=result_type, accumulator_type=accumulator_type, name=name)

    def declare(cls: type):
        setattr(cls, DECLARATION, AggregateUdf(cls, result_type=result_type, accumulator_type=accumulator_type,
                                               name=name))
        return cls

    if function is not None:  # weir.udaf(MyAgg, result_type=...): the declaration itself
        return AggregateUdf(function, result_type=result_type, accumulator_type=accumulator_type, name=name)
    return declare


def declaration(value: Any) -> AggregateUdf | None:
    """The UDAF ``value`` declares: an ``AggregateUdf``, a class ``@weir.udaf`` decorated or an
    instance of one."""
    if isinstance(value, AggregateUdf):
        return value
    found = vars(value if inspect.isclass(value) else type(value)).get(DECLARATION)  # its own, not a base's
    return found if isinstance(found, AggregateUdf) else None


def looks_aggregate(value: Any) -> bool:
    """A class (or an instance of one) with Flink's aggregate methods, maybe undeclared."""
    return callable(getattr(value, "create_accumulator", None))


def import_attribute(module: str, qualname: str, *, what: str) -> Any:
    """``module``.``qualname``, imported (as ``udfs.resolve`` imports a scalar UDF); a UdfError
    names what failed and the fix."""
    if module in ("__main__", "__mp_main__") and getattr(sys.modules.get("__main__"), "__file__", None) is None:
        raise UdfError(f"the aggregate function {what} is defined in __main__ (a notebook or an interactive "
                       "session), which another process cannot import",
                       hint="move it into a module on the Python path (my_udafs.py) and register it from there, "
                            "or run the job at parallelism 1")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        value: Any = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to see
        raise UdfError(f"cannot import the module {module!r} of the aggregate function {what}: "
                       f"{type(exc).__name__}: {exc}",
                       hint=f"make {module} importable (on PYTHONPATH or installed) in every process that "
                            "runs the job") from exc
    for part in qualname.split("."):
        value = getattr(value, part, None)
        if value is None:
            raise UdfError(f"the module {module!r} has no attribute {qualname!r}",
                           hint=f"check the name after the last dot in '{module}.{qualname}'")
    return value


#: The classes declared in this process, by (module, qualname): a class defined in a function or
#: in ``__main__`` runs here without an import (another process imports it by name).
_INSTALLED: dict[tuple[str, str], type] = {}


def install(function: AggregateUdf) -> None:
    """Make ``function``'s class resolvable in this process as it is (``PythonAggregate``)."""
    _INSTALLED[(function.cls.__module__, function.cls.__qualname__)] = function.cls


# -- running -----------------------------------------------------------------------------------------


def _combined(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _is_of(value: Any, kind: pa.DataType) -> bool:
    try:
        pa.array([value], type=kind)
        return True
    except (pa.ArrowException, TypeError, ValueError):
        return False


def _keys(keys: tuple) -> list[tuple] | None:
    """The group keys an operator passes beside the rows (a struct of the key columns per group,
    ``key_sql``: the callback's last argument, if any), as tuples of values; None without."""
    if not keys:
        return None
    return [tuple(k.values()) if isinstance(k, dict) else (k,) for k in _combined(keys[0]).to_pylist()]


def key_sql(columns: list[str]) -> str:
    """The trailing argument an operator gives ``<accumulate>`` and ``<apply>`` so that a failing
    row's error names its group key: a struct of the key ``columns`` ("" when there are none)."""
    return f", struct_pack({', '.join(columns)})" if columns else ""


def _dumps(acc: Any) -> bytes:
    return pickle.dumps(acc, protocol=PICKLE_PROTOCOL)


class PythonAggregate:
    """A UDAF as one operator runs it: the instance and the DuckDB functions that call it."""

    def __init__(self, spec: PythonAggregateSpec, operator_id: str | None = None):
        self.spec = spec
        value = _INSTALLED.get((spec.module, spec.qualname)) or import_attribute(spec.module, spec.qualname,
                                                                                 what=spec.name)
        declared = declaration(value)
        cls = declared.cls if declared is not None else value
        if not inspect.isclass(cls):
            raise UdfError(f"{spec.module}.{spec.qualname} is a {type(cls).__name__}, not an aggregate function "
                           "class", hint="name a class decorated with @weir.udaf(result_type=...)",
                           operator_id=operator_id)
        try:
            self.instance = cls()
        except Exception as exc:  # noqa: BLE001 - the user's constructor
            raise UdfError(f"cannot create the aggregate function {spec.name} ({cls.__qualname__}()): "
                           f"{type(exc).__name__}: {exc}",
                           hint="every process creates it with no arguments: give the constructor defaults",
                           operator_id=operator_id) from exc
        self.result = arrow_type(spec.result_type)
        prefix = f"__weir_udaf_{spec.name.lower()}"
        #: The DuckDB function names: list of arguments -> accumulator; list of accumulators ->
        #: accumulator; accumulator -> value; (accumulator, signed rows) -> accumulator.
        self.accumulate_fn, self.merge_fn = f"{prefix}_accumulate", f"{prefix}_merge"
        self.value_fn, self.apply_fn = f"{prefix}_value", f"{prefix}_apply"
        #: accumulator, group key -> value (a failure names the key: the group aggregate's).
        self.keyed_value_fn = f"{prefix}_keyed_value"
        f = self.instance
        self._create = f.create_accumulator
        self._row = {"accumulate": getattr(f, "accumulate", None), "retract": getattr(f, "retract", None)}
        self._batch = {"accumulate": getattr(f, "accumulate_batch", None), "retract": getattr(f, "retract_batch", None)}
        #: While not None (a group aggregate re-running a batch that raised, with the bad-rows
        #: setting): ``<apply>`` accumulates a failing group's rows one at a time instead of raising,
        #: leaving out each row that raises, here by its arrival number (the rows' field ``q``).
        self.catching: dict[int, UdfFailure] | None = None
        #: The methods whose failing row the operator can keep with the bad-rows setting (the group
        #: aggregate: accumulate and retract; the window, session and OVER aggregates: accumulate);
        #: for the others an error's hint says the job fails anyway.
        self.keeps_rows: tuple[str, ...] = ()

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        for name, fn, result in ((self.accumulate_fn, self._accumulate_lists, "BLOB"),
                                 (self.merge_fn, self._merge_lists, "BLOB"),
                                 (self.value_fn, self._values, self.spec.result_type),
                                 (self.keyed_value_fn, self._keyed_values, self.spec.result_type),
                                 (self.apply_fn, self._apply, "BLOB")):
            try:
                con.remove_function(name)
            except duckdb.Error:
                pass
            con.create_function(name, fn, None, result, type="arrow", null_handling="special", side_effects=True)

    # -- the callbacks ------------------------------------------------------------------------------
    def _arguments(self, values: pa.Array) -> list[pa.Array]:
        """The argument arrays of a list's values: one, a struct's fields, or none (arity 0)."""
        if self.spec.arity == 0:
            return []
        if self.spec.arity == 1:
            return [values]
        return [values.field(i) for i in range(self.spec.arity)]

    def _fold(self, method: str, acc: Any, arguments: list[pa.Array], start: int, stop: int,
              rows: list[list] | None) -> None:
        """``method`` ("accumulate" or "retract") of rows ``start:stop`` into ``acc``: by the batch
        method on array slices where the class has one, else a call per row."""
        batch = self._batch[method]
        if batch is not None:
            batch(acc, *(a.slice(start, stop - start) for a in arguments))
            return
        call = self._row[method]
        if not arguments:
            for _ in range(start, stop):
                call(acc)
        elif len(rows) == 1:
            for v in rows[0][start:stop]:
                call(acc, v)
        else:
            for row in zip(*(r[start:stop] for r in rows)):
                call(acc, *row)

    def _python_rows(self, method: str, arguments: list[pa.Array]) -> list[list] | None:
        return None if self._batch[method] is not None else [a.to_pylist() for a in arguments]

    def _accumulate_lists(self, lists, *keys) -> pa.Array:  # varargs: DuckDB takes 1 or 2 arguments
        lists, keys = _combined(lists), _keys(keys)
        offsets = numpy_values(lists.offsets)
        arguments = self._arguments(lists.values)
        rows = self._python_rows("accumulate", arguments)
        valid = numpy_values(lists.is_valid()) if lists.null_count else None
        out = []
        for i in range(len(lists)):
            acc = self._call("create_accumulator", self._create)
            start, stop = int(offsets[i]), int(offsets[i + 1])
            if stop > start and (valid is None or valid[i]):
                try:
                    self._fold("accumulate", acc, arguments, start, stop, rows)
                except Exception as exc:  # noqa: BLE001
                    self._fail_in_rows("accumulate", arguments, start, stop, exc, keys and keys[i])
                    raise
            out.append(_dumps(acc))
        return pa.array(out, pa.binary())

    def _merge_lists(self, lists) -> pa.Array:
        lists = _combined(lists)
        out = []
        for blobs in lists.to_pylist():
            blobs = [b for b in blobs or () if b is not None]
            if len(blobs) == 1:
                out.append(blobs[0])
                continue
            if not blobs:
                out.append(_dumps(self._call("create_accumulator", self._create)))
                continue
            acc, *others = [pickle.loads(b) for b in blobs]
            self._call("merge", self.instance.merge, acc, others)
            out.append(_dumps(acc))
        return pa.array(out, pa.binary())

    def _values(self, blobs) -> pa.Array:
        return self._keyed_values(blobs, None)

    def _keyed_values(self, blobs, keys) -> pa.Array:
        """``get_value`` of each accumulator; a failure names its group key (``keys``: a struct of
        the key columns per row, from ``key_sql``; or None)."""
        keys = _keys((keys,)) if keys is not None else None
        out = []
        for i, blob in enumerate(_combined(blobs).to_pylist()):
            acc = pickle.loads(blob) if blob is not None else self._call("create_accumulator", self._create)
            out.append(self._call("get_value", self.instance.get_value, acc, key=keys and keys[i]))
        return self._result_array(out)

    def _result_array(self, out: list) -> pa.Array:
        """``get_value``'s results as an array of the result type (a UdfError naming a bad one)."""
        try:
            return pa.array(out, type=self.result)
        except (pa.ArrowException, TypeError, ValueError) as exc:
            bad = next((v for v in out if not _is_of(v, self.result)), None)
            error = UdfError(f"the aggregate function {self.spec.name} returned {bad!r} from get_value, not "
                             f"a {self.spec.result_type}",
                             hint=f"return values of its result_type {self.spec.result_type} (or None)")
            record_failure(self.spec.name, (), error)
            raise error from exc

    def _apply(self, states, lists, *keys) -> pa.Array:
        """Each key's accumulator (NULL: none yet) with its batch's signed rows folded in."""
        states, lists, keys = _combined(states).to_pylist(), _combined(lists), _keys(keys)
        offsets = numpy_values(lists.offsets)
        values = lists.values
        signs = numpy_values(values.field(0)) if len(values) else np.zeros(0, np.int8)
        arguments = self._arguments(values.field(1)) if len(values) else []
        rows = {m: self._python_rows(m, arguments) for m in ("accumulate", "retract")}
        valid = numpy_values(lists.is_valid()) if lists.null_count else None
        catching = self.catching is not None and len(values) and values.type.num_fields > 2
        out = []
        for i, blob in enumerate(states):
            acc = pickle.loads(blob) if blob is not None else self._call("create_accumulator", self._create)
            start, stop = int(offsets[i]), int(offsets[i + 1])
            if stop > start and (valid is None or valid[i]):
                # runs of one sign, in arrival order
                changes = np.flatnonzero(np.diff(signs[start:stop])) + start + 1
                bounds = [start, *changes.tolist(), stop]
                for lo, hi in zip(bounds, bounds[1:]):
                    method = "accumulate" if signs[lo] > 0 else "retract"
                    before = _dumps(acc) if catching else None
                    try:
                        self._fold(method, acc, arguments, lo, hi, rows[method])
                    except Exception as exc:  # noqa: BLE001
                        if before is not None:
                            acc = self._fold_caught(method, pickle.loads(before), arguments, lo, hi, rows[method],
                                                    values.field(2), keys and keys[i])
                            continue
                        self._fail_in_rows(method, arguments, lo, hi, exc, keys and keys[i])
                        raise
            out.append(_dumps(acc))
        return pa.array(out, pa.binary())

    def _fold_caught(self, method: str, acc: Any, arguments: list[pa.Array], start: int, stop: int,
                     rows: list[list] | None, numbers: pa.Array, key: tuple | None) -> Any:
        """``acc`` with rows ``start:stop`` folded in by ``method`` ("accumulate" or "retract") one at
        a time, each on a copy: a row that raises is left out and kept in ``catching`` by its number
        (``numbers``), with its failure."""
        for j in range(start, stop):
            copy = pickle.loads(_dumps(acc))
            try:
                self._fold(method, copy, arguments, j, j + 1, rows)
            except Exception as exc:  # noqa: BLE001
                exc.__suppress_context__ = True  # the row's traceback alone, not the group's before it
                record_failure(f"{self.spec.name} ({method})", tuple(a[j].as_py() for a in arguments), exc, key,
                               method, self._keepable(method))
                self.catching[numbers[j].as_py()] = take_failure()
                continue
            acc = copy
        return acc

    def raising_rows(self, lists: pa.Array, keys: pa.Array | None = None) -> dict[int, UdfFailure]:
        """The rows ``accumulate`` raises on, by number, with their failures (the window and session
        aggregates' bad rows, ``engine.operators.bad_aggregate_rows``). ``lists`` holds per group its
        rows ``{v: argument, q: number}`` in arrival order (``keys``: a struct of each group's key
        columns, ``key_sql``, or None): each group is
        folded at once into a new accumulator, and where that raises, one row at a time on a copy
        of the accumulator, as ``_apply`` does while ``catching``."""
        lists, keys = _combined(lists), _keys((keys,)) if keys is not None else None
        values = lists.values
        arguments = self._arguments(values.field("v")) if self.spec.arity else []
        rows = self._python_rows("accumulate", arguments)
        offsets = numpy_values(lists.offsets)
        valid = numpy_values(lists.is_valid()) if lists.null_count else None
        self.catching = {}
        try:
            for i in range(len(lists)):
                start, stop = int(offsets[i]), int(offsets[i + 1])
                if stop == start or (valid is not None and not valid[i]):
                    continue
                try:
                    self._fold("accumulate", self._create(), arguments, start, stop, rows)
                except Exception:  # noqa: BLE001 - which rows: one at a time
                    self._fold_caught("accumulate", self._call("create_accumulator", self._create), arguments,
                                      start, stop, rows, values.field("q"), keys and keys[i])
            return self.catching
        finally:
            self.catching = None

    def over_frames(self, blobs: list, values: pa.Array | None, offsets: np.ndarray, history: np.ndarray,
                    lows: np.ndarray, highs: np.ndarray, ready: np.ndarray, drops: np.ndarray,
                    keys: list[tuple] | None = None) -> tuple[list, pa.Array]:
        """An OVER window's frames, slid key by key (``engine.operators.over_aggregate``).

        Key ``i``'s rows, in the window's order, are ``values[offsets[i]:offsets[i + 1]]`` (the
        argument, a struct of several, or None for a function of no argument);
        its accumulator ``blobs[i]`` (None: a new one) holds the first ``history[i]`` of them.
        Each later row ``r`` (its frame ``lows[r]:highs[r]``, positions within the key, for the
        rows ``ready[i]:ready[i + 1]`` of ``lows``) retracts the rows leaving the frame, then
        accumulates the rows entering it (Flink's order), and takes ``get_value``; rows of one
        frame (RANGE peers) share one call. Then the rows before ``drops[i]`` (which leave the
        state) are retracted. Returns each key's accumulator pickled and the values, in row order."""
        arguments = self._arguments(values) if values is not None else []
        rows = [a.to_pylist() for a in arguments] if any(self._row.values()) else None
        accumulate, retract = self._folder("accumulate", arguments, rows), self._folder("retract", arguments, rows)
        get_value = self.instance.get_value
        offsets, history, drops = offsets.tolist(), history.tolist(), drops.tolist()
        lows, highs, ready = lows.tolist(), highs.tolist(), ready.tolist()
        out_blobs, results = [], []
        for i, blob in enumerate(blobs):
            acc = pickle.loads(blob) if blob is not None else self._call("create_accumulator", self._create)
            base, key = offsets[i], keys[i] if keys else None
            low, high, frame, value = base, base + history[i], None, None
            for r in range(ready[i], ready[i + 1]):
                if (lows[r], highs[r]) != frame:  # a new frame (RANGE peers share theirs)
                    frame = lows[r], highs[r]
                    if base + frame[0] > low:
                        retract(acc, low, base + frame[0], key)
                        low = base + frame[0]
                    if base + frame[1] > high:
                        accumulate(acc, high, base + frame[1], key)
                        high = base + frame[1]
                    try:
                        value = get_value(acc)
                    except Exception as exc:
                        record_failure(f"{self.spec.name} (get_value)", (acc,), exc, key, "get_value", False)
                        raise
                results.append(value)
            if base + drops[i] > low:
                retract(acc, low, base + drops[i], key)
            out_blobs.append(_dumps(acc))
        return out_blobs, self._result_array(results)

    def _folder(self, method: str, arguments: list[pa.Array], rows: list[list] | None) -> Callable:
        """``fold(acc, start, stop, key)``: ``method`` of rows ``start:stop`` into ``acc`` (``rows``:
        the arguments as Python lists, where the class has a row method), a failure recorded with
        the row and the ``key``. As ``_fold``, but a class with both forms gets a single row (a
        frame sliding by one) by its row method, without making an array of one."""
        row, batch = self._row[method], self._batch[method]
        values = rows if batch is None else None
        column = rows[0] if row is not None and len(arguments) == 1 else None

        def fold(acc, start, stop, key):
            try:
                if column is not None and (batch is None or stop - start == 1):
                    for v in column[start:stop]:
                        row(acc, v)
                else:
                    self._fold(method, acc, arguments, start, stop, values)
            except Exception as exc:  # noqa: BLE001
                self._fail_in_rows(method, arguments, start, stop, exc, key)
                raise
        return fold

    # -- failing -----------------------------------------------------------------------------------
    def _keepable(self, method: str) -> bool:
        return method in self.keeps_rows

    def _call(self, method: str, fn: Callable, *args, key: tuple | None = None):
        try:
            return fn(*args)
        except Exception as exc:
            values = args if method in ("get_value", "merge") else args[1:]
            record_failure(f"{self.spec.name} ({method})", values, exc, key, method, self._keepable(method))
            raise

    def _fail_in_rows(self, method: str, arguments: list[pa.Array], start: int, stop: int,
                      exc: BaseException, key: tuple | None = None) -> None:
        """Record the failure of ``method`` on rows ``start:stop`` (of the group ``key``), narrowed
        to the first row that fails alone (on a fresh accumulator); else the rows as a whole."""
        record_failure(f"{self.spec.name} ({method})", (), exc, key, method, self._keepable(method))
        call = self._row[method]
        if call is None:  # only a batch method: its rows one at a time
            def call(acc, *values):
                self._batch[method](acc, *(pa.array([v], a.type) for v, a in zip(values, arguments)))
        columns = [a.slice(start, stop - start).to_pylist() for a in arguments]
        for values in (zip(*columns) if columns else [()] * (stop - start)):
            try:
                call(self._create(), *values)
            except Exception as single:  # noqa: BLE001
                single.__suppress_context__ = True  # its traceback alone: not the group's failure before it
                record_failure(f"{self.spec.name} ({method})", tuple(values), single, key, method,
                               self._keepable(method))
                return

"""Python user-defined table functions: one input row in, any number of rows out.

A table function is a Python function wrapped by ``@weir.udtf(result_types=[...])``, applied in
SQL with Flink's ``LATERAL TABLE(f(x))`` (the ``table_function`` operator,
``engine.operators.table_function``). Its output columns are ``f0, f1, ...`` as in Flink; SQL
renames them (``AS T(word, n)``). Two forms:

- ``func_type="general"`` (the default, as PyFlink's ``@udtf``): a function of one row's Python
  values (``None`` for NULL) that yields (or returns an iterable of) rows: a tuple (or list,
  or PyFlink-style ``Row``) of one value per result type, or a bare value when there is one
  result type. Returning ``None`` yields nothing. weir calls it once per input row (rows of
  tuples of two or more values reach Arrow in one struct conversion: ``_struct_rows``).
- ``func_type="arrow"``: a function of ``pyarrow.Array`` arguments (one chunk of input rows)
  returning a ``pyarrow.Table`` or ``RecordBatch`` whose first column is the input row index
  (0-based, within the chunk) each output row belongs to, then one column per result type.
  ``pyarrow.compute.list_parent_indices`` gives that index for a list column; weir calls it
  once per chunk, so the hot path makes no Python call per row.

How a table function reaches the engine: the planner resolves it (``CREATE FUNCTION f AS
'pkg.mod.f'`` imports ``pkg.mod``, ``load``) and ``install``\\ s it in the session's registry
(``engine.udfs.FunctionRegistry``);
the ``table_function`` node's config carries its ``TableFunctionSpec`` (name, module, qualname,
result types, func type), and every process that runs the node takes the installed function of
that spec or imports the module by name (``function_for``). A table function is never a DuckDB
function: it is called only by its operator, so its name may be that of a built-in scalar
function (``split``).

``apply`` calls it over a chunk and returns, per output row, the index of its input row and
the result columns; an exception fails with the function's name, the input row's values and
the Python traceback (``engine.udfs.UdfFailure``, as for a scalar UDF); a row of the wrong
width, or values not of the declared types, with the fix.
"""
from __future__ import annotations

import gc
import inspect
import sys
import threading
import traceback
from dataclasses import dataclass
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine import udfs
from weir.engine.operators.config import OperatorConfig
from weir.engine.pandas_import import arrow_array, numpy_values
from weir.engine.udfs import UdfError, UdfFailure, arrow_type, duckdb_type

FUNC_TYPES = ("general", "arrow")


@dataclass(frozen=True)
class TableFunctionSpec(OperatorConfig):
    """What a ``table_function`` node carries of its function: enough for any process to import it."""

    name: str
    module: str
    qualname: str
    #: DuckDB types of the output columns f0, f1, ...
    result_types: tuple[str, ...]
    func_type: str = "general"

    @property
    def result_arrow_types(self) -> list[pa.DataType]:
        return [arrow_type(t) for t in self.result_types]


class TableFunction:
    """A Python function declared as a weir table function (``udtf``). Calling it calls the function."""

    def __init__(self, fn: Callable, *, result_types, func_type: str = "general", name: str | None = None):
        label = getattr(fn, "__name__", repr(fn))
        if not callable(fn):
            raise UdfError(f"weir.udtf needs a function, got {type(fn).__name__}",
                           hint="decorate a generator function: @weir.udtf(result_types=['STRING', 'BIGINT'])")
        if func_type not in FUNC_TYPES:
            hint = ("weir's vectorised table functions take pyarrow arrays: func_type='arrow'"
                    if func_type == "pandas" else "use func_type='general' or 'arrow'")
            raise UdfError(f"func_type {func_type!r} is not supported for the table function {label}", hint=hint)
        if isinstance(result_types, str):
            result_types = [result_types]
        if not result_types:
            raise UdfError(f"the table function {label} needs result_types",
                           hint="declare its output columns' types: @weir.udtf(result_types=['STRING', 'BIGINT'])")
        self.fn = fn
        self.name = name or fn.__name__
        self.result_types = tuple(duckdb_type(t) for t in result_types)
        self.func_type = func_type
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<weir udtf {self.name}: {self.func_type} -> ({', '.join(self.result_types)})>"

    def spec(self, name: str | None = None) -> TableFunctionSpec:
        return TableFunctionSpec(name or self.name, self.fn.__module__, self.fn.__qualname__, self.result_types,
                                 self.func_type)

    def arity_problem(self, count: int) -> str | None:
        """Why the function cannot take ``count`` arguments (None: it can)."""
        try:
            inspect.signature(self.fn).bind(*range(count))
        except TypeError as reason:
            return f"the table function {self.name} cannot take {count} argument(s): {reason}"
        except ValueError:  # no signature to check
            return None
        return None


def udtf(fn: Callable | None = None, *, result_types=None, func_type: str = "general", name: str | None = None):
    """Declare a table function: ``@weir.udtf(result_types=["STRING", "BIGINT"])`` over a generator
    of rows, or ``func_type="arrow"`` over pyarrow arrays (see the module's docstring)."""
    def wrap(f: Callable) -> TableFunction:
        return TableFunction(f, result_types=result_types, func_type=func_type, name=name)

    return wrap(fn) if fn is not None else wrap


# -- importing -------------------------------------------------------------------------------------


def resolve(module: str, qualname: str, *, what: str | None = None):
    """The weir function (a ``TableFunction`` or a scalar ``engine.udfs.ScalarFunction``)
    ``module``.``qualname``, imported; ``engine.udfs.resolve`` does the importing and names what
    failed and the fix."""
    try:
        return udfs.resolve(module, qualname, what=what)
    except UdfError:
        value = _attribute(sys.modules.get(module), qualname)
        if isinstance(value, TableFunction):  # imported, and a table function, not a scalar UDF
            return value
        raise


def _attribute(obj: Any, qualname: str) -> Any:
    for part in qualname.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    return obj


def load(target: str):
    """The weir function (scalar or table) named by ``'package.module.attribute'``."""
    module, dot, attribute = target.strip().rpartition(".")
    if not dot or not module or not attribute:
        return udfs.load(target)  # its error names the fix
    return resolve(module, attribute, what=target)


# -- the session's registry ------------------------------------------------------------------------

_LOCK = threading.Lock()


def _registry() -> dict[str, TableFunction]:
    """The current session's table functions (``engine.udfs.FunctionRegistry``: each connection
    has its own, and a job's thread the one of the session that started it)."""
    return udfs.current().table_functions


def install(function: TableFunction, name: str | None = None) -> TableFunctionSpec:
    """Remember ``function`` as ``name`` in the current registry (a function of ``__main__`` runs from here)."""
    spec = function.spec(name)
    with _LOCK:
        _registry()[spec.name.lower()] = function
    return spec


def uninstall(name: str) -> None:
    with _LOCK:
        _registry().pop(name.lower(), None)


def function_for(spec: TableFunctionSpec) -> TableFunction:
    """The function of ``spec``: the one installed in the current registry (or, planned outside
    any session, in ``udfs.PROCESS``) when it is that spec, else imported by module and name (a
    worker, a restarted job)."""
    for registry in (_registry(), udfs.PROCESS.table_functions):
        installed = registry.get(spec.name.lower())
        if installed is not None and installed.spec(spec.name) == spec:
            return installed
    function = resolve(spec.module, spec.qualname, what=spec.name)
    if not isinstance(function, TableFunction):
        raise UdfError(f"{spec.module}.{spec.qualname} is a scalar function, not the table function {spec.name}",
                       hint="declare it with @weir.udtf(result_types=[...])")
    if function.spec(spec.name) != spec:
        raise UdfError(f"the table function {spec.name} ({spec.module}.{spec.qualname}) changed since the job was "
                       f"planned: it declares {function.result_types} ({function.func_type}), the job "
                       f"{spec.result_types} ({spec.func_type})",
                       hint="plan the job again with the function as it is now")
    return function


# -- calling ----------------------------------------------------------------------------------------


def apply(function: TableFunction, arguments: list[pa.Array], rows: int) -> tuple[np.ndarray, list[pa.Array]]:
    """Call ``function`` over one chunk of ``rows`` input rows (its ``arguments``): the input row
    index of every output row (non-decreasing: each input row's outputs together, in order) and
    the output columns, of the declared types. A UdfError says what failed."""
    if function.func_type == "arrow":
        return _apply_arrow(function, arguments, rows)
    return _apply_rows(function, arguments, rows)


def _failure(name: str, values: tuple, exc: BaseException) -> UdfError:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return UdfFailure(name, values, f"{type(exc).__name__}: {exc}", text).engine_error(None)


def _apply_rows(function: TableFunction, arguments: list[pa.Array], rows: int):
    # The garbage collector is paused while the rows' outputs are built: the many small tuples
    # would otherwise start a collection every few hundred rows (a third of the time); it runs
    # again, as usual, once they are arrays and the Python lists are gone (a collection would
    # otherwise walk every tuple still alive).
    collecting = gc.isenabled()
    gc.disable()
    try:
        fast = _struct_rows(function, arguments, rows)
        if fast is not None:
            return fast
        index, columns = _rows_of(function, arguments, rows)
        arrays = [_typed(function, j, column) for j, column in enumerate(columns)]
        del columns
    finally:
        if collecting:
            gc.enable()
    return index, arrays


#: What ``_struct_rows`` puts after each input row's outputs: a NULL struct, which no row of two
#: or more values is.
_END = (None,)


def _struct_rows(function: TableFunction, arguments: list[pa.Array], rows: int):
    """The general form with two or more result types, as pyarrow converts it: every input row's
    output tuples, then ``_END``, in one flat list that ``pyarrow.array`` makes one struct array
    of (no Python list per row, nor a pass per column); the NULLs (``_END``) say which input row
    each output row belongs to. None when anything is not so (the user's exception, a function
    returning None, a row that is no tuple or of the wrong width or types): ``_rows_of`` then runs
    the rows again and says what is wrong."""
    if len(function.result_types) < 2 or not arguments:
        return None
    struct = pa.struct([pa.field(f"f{j}", arrow_type(t)) for j, t in enumerate(function.result_types)])
    try:
        out = list(chain.from_iterable(map(chain, map(function.fn, *(a.to_pylist() for a in arguments)),
                                           repeat(_END))))
        if len(out) > rows and not isinstance(next(v for v in out if v is not None), tuple):
            return None  # a dict would convert, by field name: not a row weir takes
        table = pa.array(out, type=struct)
    except Exception:  # noqa: BLE001 - _rows_of tells the user's exception from weir's complaint
        return None
    del out
    ends = table.is_null()
    if table.null_count != rows:  # a row that was None: _rows_of names it
        return None
    mask = numpy_values(ends)
    index = (np.cumsum(mask, dtype=np.int64) - mask)[~mask]
    return index, table.filter(pc.invert(ends)).flatten()


def _rows_of(function: TableFunction, arguments: list[pa.Array], rows: int) -> tuple[np.ndarray, list[list]]:
    fn = function.fn
    values = [a.to_pylist() for a in arguments]
    try:  # each row's outputs as a list: a comprehension over map, no Python loop of weir's own
        produced = [[*p] if p is not None else () for p in (map(fn, *values) if values else (fn() for _ in range(rows)))]
    except Exception as exc:  # noqa: BLE001 - the user's function failed: find the row, say where
        raise _first_failing_row(function, values, rows, exc) from exc
    return _columns_of(function, produced, rows)


def _columns_of(function: TableFunction, produced: list, rows: int) -> tuple[np.ndarray, list[list]]:
    """Each input row's outputs (``produced``, a list per row) as the index of each output row's
    input row and the result columns (Python lists); a row of the wrong width is refused."""
    width = len(function.result_types)
    counts = np.fromiter(map(len, produced), dtype=np.int64, count=rows)
    index = np.repeat(np.arange(rows, dtype=np.int64), counts)
    out = list(chain.from_iterable(produced))
    if width == 1:
        column = [v[0] if isinstance(v, (tuple, list)) and len(v) == 1 else v for v in out]
        bad = next((v for v in column if isinstance(v, (tuple, list))), None)
        if bad is not None:
            raise _width_error(function, bad)
        columns = [column]
    else:
        try:
            if set(map(len, out)) - {width}:
                raise TypeError
        except TypeError:
            raise _width_error(function, next(v for v in out if not _is_row(v, width))) from None
        columns = [list(map(itemgetter(j), out)) for j in range(width)]  # (zip(*out) is slow for many rows)
    return index, columns


def _first_failing_row(function: TableFunction, values: list[list], rows: int, exc: Exception) -> UdfError:
    for row in (zip(*values) if values else ((),) * rows):
        try:
            produced = function.fn(*row)
            if produced is not None:
                for _ in produced:
                    pass
        except Exception as row_exc:  # noqa: BLE001
            return _failure(function.name, row, row_exc)
    return _failure(function.name, (), exc)  # it failed only with the rows before it: say so


def _is_row(value: Any, width: int) -> bool:
    try:
        return len(value) == width and not isinstance(value, (str, bytes))
    except TypeError:
        return False


def _width_error(function: TableFunction, value: Any) -> UdfError:
    width = len(function.result_types)
    types = ", ".join(function.result_types)
    if width == 1:
        return UdfError(f"the table function {function.name} yielded {value!r}, not one {types} value",
                        hint=f"it declares one result type ({types}): yield a value (or a 1-tuple) per row")
    return UdfError(f"the table function {function.name} yielded {value!r}, not a row of {width} values",
                    hint=f"it declares {width} result types ({types}): yield a tuple of {width} values per row, "
                         "or change result_types")


def _typed(function: TableFunction, j: int, values) -> pa.Array:
    target = arrow_type(function.result_types[j])
    try:
        return pa.array(values, type=target) if not isinstance(values, (pa.Array, pa.ChunkedArray)) \
            else _cast(values, target)
    except (pa.ArrowException, TypeError, ValueError) as exc:
        bad = next((v for v in values if _not_of(v, target)), None) if isinstance(values, list) else None
        shown = f"{bad!r}" if bad is not None else f"{getattr(values, 'type', type(values).__name__)} values"
        raise UdfError(f"the table function {function.name} returned {shown} as f{j}, not a "
                       f"{function.result_types[j]}: {exc}",
                       hint=f"return values of its result type {function.result_types[j]} (or None) in column f{j}") \
            from exc


def _not_of(value: Any, target: pa.DataType) -> bool:
    try:
        pa.array([value], type=target)
        return False
    except (pa.ArrowException, TypeError, ValueError):
        return True


def _cast(values, target: pa.DataType) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values if values.type == target else values.cast(target)


def _apply_arrow(function: TableFunction, arguments: list[pa.Array], rows: int, narrow: bool = True):
    width = len(function.result_types)
    try:
        out = function.fn(*arguments)
    except Exception as exc:  # noqa: BLE001 - narrowed to the first failing row (or a single row's):
        if narrow or rows == 1:
            raise _first_failure(function, arguments, rows, exc) from exc
        raise _failure(function.name, (), exc) from exc
    if isinstance(out, pa.RecordBatch):
        out = pa.Table.from_batches([out])
    if not isinstance(out, pa.Table):
        raise UdfError(f"the arrow table function {function.name} returned a {type(out).__name__}, not a table",
                       hint="return a pyarrow.Table: the input row index, then one column per result type "
                            "(pyarrow.compute.list_parent_indices gives the index of a list's values)")
    if out.num_columns != width + 1:
        raise UdfError(f"the arrow table function {function.name} returned {out.num_columns} columns "
                       f"({', '.join(out.column_names)}), not {width + 1}",
                       hint=f"return the input row index, then one column per result type "
                            f"({', '.join(function.result_types)})")
    index = out.column(0)
    if not pa.types.is_integer(index.type) or index.null_count:
        raise UdfError(f"the first column of what the arrow table function {function.name} returned is "
                       f"{index.type}{' with nulls' if index.null_count else ''}, not the input row index",
                       hint="return the index (0, 1, ... within the chunk) of each output row's input row first")
    positions = numpy_values(index).astype(np.int64, copy=False) if len(index) else np.zeros(0, np.int64)
    if len(positions) and (positions.min() < 0 or positions.max() >= rows):
        raise UdfError(f"the arrow table function {function.name} returned the row index "
                       f"{int(positions.min() if positions.min() < 0 else positions.max())} for a chunk of "
                       f"{rows} rows", hint=f"row indices are 0 to {rows - 1}: the positions of the argument values")
    columns = [_typed(function, j, out.column(j + 1)) for j in range(width)]
    if len(positions) > 1 and bool(np.any(positions[1:] < positions[:-1])):
        order = np.argsort(positions, kind="stable")  # each input row's outputs together, in their order
        positions = positions[order]
        take = arrow_array(order)
        columns = [c.take(take) for c in columns]
    return positions, columns


def _first_failure(function: TableFunction, arguments: list[pa.Array], rows: int, exc: Exception) -> UdfError:
    for i in range(rows):
        try:
            function.fn(*(a.slice(i, 1) for a in arguments))
        except Exception as row_exc:  # noqa: BLE001
            return _failure(function.name, tuple(a[i].as_py() for a in arguments), row_exc)
    return _failure(function.name, (), exc)


def apply_catching(function: TableFunction, arguments: list[pa.Array],
                   rows: int) -> tuple[np.ndarray, list[pa.Array], dict[int, UdfFailure]]:
    """``apply``, but a row the function raises on gives no output and its failure, kept by its
    index in the dict returned (the bad-rows setting: ``engine.operators.table_function``). The
    general form calls the function once per row, as ``apply`` does; the arrow form is called
    over halves of the chunk, down to the single rows that raise (a few vectorised calls per
    raising row). weir's own complaint (a row of the wrong width or type) still raises."""
    failures: dict[int, UdfFailure] = {}
    if function.func_type == "arrow":
        parts = _arrow_halves(function, arguments, 0, rows, failures)
        positions = np.concatenate([p for p, _ in parts]) if parts else np.zeros(0, np.int64)
        columns = [pa.concat_arrays([c[j] for _, c in parts]) if parts else pa.array([], t)
                   for j, t in enumerate(map(arrow_type, function.result_types))]
        return positions, columns, failures
    fn, values = function.fn, [a.to_pylist() for a in arguments]
    produced = []
    for i, row in enumerate(zip(*values) if values else ((),) * rows):
        try:
            out = fn(*row)
            produced.append([*out] if out is not None else ())
        except Exception as exc:  # noqa: BLE001 - the user's exception: the row is bad
            failures[i] = _failure(function.name, row, exc).failure
            produced.append(())
    collecting = gc.isenabled()
    gc.disable()
    try:
        index, columns = _columns_of(function, produced, rows)
    finally:
        if collecting:
            gc.enable()
    return index, [_typed(function, j, column) for j, column in enumerate(columns)], failures


def _arrow_halves(function: TableFunction, arguments: list[pa.Array], start: int, stop: int,
                  failures: dict[int, UdfFailure]) -> list[tuple[np.ndarray, list[pa.Array]]]:
    """The arrow function over rows ``start:stop`` (positions within the whole chunk), split in
    halves where it raises the user's exception, down to the rows that do (kept in ``failures``)."""
    if start == stop:
        return []
    try:
        positions, columns = _apply_arrow(function, [a.slice(start, stop - start) for a in arguments], stop - start,
                                          narrow=False)
    except UdfError as error:
        if error.failure is None or error.failure.raised is not None:
            raise  # weir's complaint about what it returned: no bad row
        if stop - start == 1:
            failures[start] = error.failure
            return []
        middle = (start + stop) // 2
        return (_arrow_halves(function, arguments, start, middle, failures)
                + _arrow_halves(function, arguments, middle, stop, failures))
    return [(positions + start, columns)]


def left_outer(positions: np.ndarray, columns: list[pa.Array], rows: int,
               excluded=()) -> tuple[np.ndarray, list[pa.Array]]:
    """``LEFT JOIN LATERAL ... ON TRUE``: each input row without output gets one row of NULLs,
    in input order; the ``excluded`` rows (bad rows: ``apply_catching``) get none."""
    counts = np.bincount(positions, minlength=rows) if len(positions) else np.zeros(rows, np.int64)
    missing = np.flatnonzero(counts == 0)
    if len(excluded):
        missing = np.setdiff1d(missing, np.asarray(excluded, np.int64), assume_unique=True)
    if not len(missing):
        return positions, columns
    merged = np.concatenate([positions, missing])
    order = np.argsort(merged, kind="stable")
    take = arrow_array(order)
    columns = [pa.concat_arrays([c, pa.nulls(len(missing), c.type)]).take(take) for c in columns]
    return merged[order], columns

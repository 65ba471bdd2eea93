"""Keep pyarrow from importing pandas until something that uses pandas imports it.

pyarrow imports pandas, when it is installed, on its first conversion of a Python or
NumPy value (``pa.array``, ``pa.scalar``, a ``pc`` call given a Python number): its pandas
shim asks whether the value is a pandas object, and finds out by importing pandas
(apache/arrow#34994). That import is ~0.35 s of CPU, more than the rest of a small job's
run, paid by every process of a job whether or not anything in it uses pandas.

``defer_pandas()`` steps around it:

1. If pandas is imported already, or not installed, or pyarrow has no such shim, nothing
   is done.
2. Otherwise the shim makes its one attempt at importing pandas now, while an import
   hook refuses it, so the attempt fails and the shim records "no pandas": pyarrow's conversions then treat every value as not a pandas object, which
   none is, since pandas is not imported.
3. A one-time import hook waits for pandas: when anything imports it (a UDF, a user's
   script, ``Result.df()``, pyarrow's own ``to_pandas()``), the hook asks the shim for
   pandas right after pandas' module has run; the shim imports it again (now from
   ``sys.modules``) and from then on treats pandas objects as it always does (a
   ``pd.Categorical`` becomes a dictionary array, a nullable ``Int64`` Series keeps its
   nulls). tests/engine/test_pandas_import.py checks both halves.

The shim is pyarrow's private ``pyarrow.lib._pandas_api`` (unchanged since pyarrow 0.13);
without it step 1 leaves pyarrow alone.

pyarrow's C++ side imports pandas too, once, the first time it infers the type of a Python
value (``pa.scalar(3)``, ``pc.add(array, 3)``, ``pa.array([1, 2])`` with no type); that import
cannot be put off without losing pandas' NA and NaT later, so code on the path of every job
passes typed values instead: ``scalar(3)`` is ``pa.scalar(3, pa.int64())``, the type pyarrow
would infer. tests/shell/test_startup.py runs a small job and checks that pandas stays out.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

import pyarrow as pa

#: The type pyarrow infers for a Python value of each type.
_INFERRED = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def scalar(value: bool | int | float | str) -> pa.Scalar:
    """``value`` as the Arrow scalar pyarrow would infer for it, made with that type given, so
    that pyarrow does not import pandas to infer it (see above)."""
    return pa.scalar(value, _INFERRED[type(value)])


def defer_pandas() -> None:
    """Answer pyarrow's "is pandas there?" with no until pandas is imported (see above)."""
    if "pandas" in sys.modules or any(isinstance(f, _TellPyarrowOfPandas) for f in sys.meta_path):
        return
    shim = getattr(pa.lib, "_pandas_api", None)
    if shim is None or importlib.util.find_spec("pandas") is None:
        return
    refuse = _RefusePandas()
    sys.meta_path.insert(0, refuse)
    try:
        shim.have_pandas  # the shim's one attempt at importing pandas fails
    finally:
        sys.meta_path.remove(refuse)
    sys.meta_path.insert(0, _TellPyarrowOfPandas(shim))


class _RefusePandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not imported yet", name=name)
        return None


class _TellPyarrowOfPandas(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of the real pandas so that pyarrow's shim
    learns of pandas as soon as its module has run, then leaves ``sys.meta_path``."""

    def __init__(self, shim: Any):
        self.shim = shim

    def find_spec(self, name: str, path: Any = None, target: Any = None):
        if name != "pandas":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenTellPyarrow(spec.loader, self.shim)
        return spec


class _ThenTellPyarrow(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, shim: Any):
        self._loader = loader
        self._shim = shim

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._shim.pd  # the shim imports pandas (now in sys.modules) and keeps its types

    def __getattr__(self, name: str):
        return getattr(self._loader, name)  # resource readers, get_source, is_package ...


def numpy_values(values: pa.Array | pa.ChunkedArray) -> "np.ndarray":
    """The values of a numeric, temporal or boolean array without NULLs as an ndarray (zero-copy
    but for booleans, which Arrow packs in bits, and several chunks). ``Array.to_numpy`` goes
    through pyarrow's pandas conversion, which imports pandas (~1 s of CPU); this reads the
    buffer instead."""
    import numpy as np

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if values.null_count:
        raise ValueError("numpy_values takes an array without NULLs")
    kind = values.type
    if pa.types.is_boolean(kind):
        bits = np.frombuffer(values.buffers()[1], np.uint8)
        return np.unpackbits(bits, bitorder="little", count=values.offset + len(values))[values.offset:].view(bool)
    # (not ``kind.to_pandas_dtype()``: that imports pandas too)
    prefix = "float" if pa.types.is_floating(kind) else "uint" if pa.types.is_unsigned_integer(kind) else "int"
    dtype = np.dtype(f"{prefix}{kind.bit_width}")
    return np.frombuffer(values.buffers()[1], dtype, count=len(values), offset=values.offset * dtype.itemsize)


def arrow_array(values: "np.ndarray", type: pa.DataType | None = None, mask: "np.ndarray | None" = None) -> pa.Array:
    """A 1-d numeric, temporal or boolean ndarray as an Arrow array: what ``pa.array(values,
    type, mask=mask)`` makes (``mask`` True where the value is NULL), made from the array's
    buffer. ``pa.array`` of an ndarray asks whether it is a masked array, ``np.ma.MaskedArray``,
    and that attribute imports ``numpy.ma``: ~20 ms in every process of a job that
    converts one (measured alone; -X importtime on a loaded machine showed 0.12 s). Zero-copy for a contiguous array of a type
    Arrow shares (booleans are packed into bits); ``type``, if given, is cast to."""
    import numpy as np

    if values.ndim != 1 or values.dtype.kind not in "biufmM":
        raise TypeError(f"arrow_array takes a 1-d numeric, temporal or boolean array, not {values.dtype}")
    length = len(values)
    if values.dtype.kind == "b":
        data = pa.py_buffer(np.packbits(values, bitorder="little"))
        made = pa.bool_()
    else:
        values = np.ascontiguousarray(values)
        made = pa.from_numpy_dtype(values.dtype)
        data = pa.py_buffer(values)
    validity = None if mask is None else pa.py_buffer(np.packbits(~np.asarray(mask, bool), bitorder="little"))
    nulls = -1 if mask is not None else 0
    array = pa.Array.from_buffers(made, length, [validity, data], null_count=nulls)
    return array if type is None or type == made else array.cast(type)

"""Window assigners: which slice an event-time row belongs to, which windows a slice is
part of, and when a window fires.

An assigner maps each row to one *slice*, identified by its start (µs); state
is kept per slice and a window is the union of its slices, so each row is
aggregated once however many windows it belongs to:

- TUMBLE: a window is one slice of ``size``;
- HOP: slices of ``slide``; a window of ``size`` is ``size / slide`` slices,
  and every slice is part of ``size / slide`` windows;
- CUMULATE: slices of ``step``; the windows of one ``size``-aligned period
  are its first slice, its first two, ... up to all ``size / step`` of them.

SESSION windows are not sliced: ``session_window.py`` keeps intervals and
merges them in SQL.

Semantics follow Flink: windows are aligned to the epoch plus ``offset``,
``[window_start, window_end)``, ``window_time = window_end - 1 ms``, and a
window fires once the watermark reaches its ``window_time``. A row is late
once every window its slice is part of has fired; a row some of whose windows
have fired still counts in the others.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.errors import EngineError
from weir.engine.operators.config import OperatorConfig, optional
from weir.engine.pandas_import import arrow_array, numpy_values, scalar

#: window_time = window_end - 1 ms: the largest timestamp inside the window
#: at Flink's millisecond resolution; a window fires when the watermark reaches it.
WINDOW_TIME_LAG_US = 1000


def align(ts: int, width: int, offset: int) -> int:
    """The start of the ``width``-wide period holding ``ts`` (Python's % is non-negative)."""
    return ts - (ts - offset) % width


def align_sql(ts_sql: str, width: int, offset: int) -> str:
    """The same as SQL over a BIGINT µs expression (DuckDB's % keeps the dividend's sign)."""
    return f"({ts_sql} - ((({ts_sql} - {offset}) % {width}) + {width}) % {width})"


def typed(values: pa.Array | int) -> pa.Array | pa.Scalar:
    """An array as it is, an int as an int64 scalar: an untyped one makes pyarrow import pandas."""
    return scalar(values) if isinstance(values, int) else values


def align_numpy(ts: np.ndarray, width: int, offset: int) -> np.ndarray:
    """``align`` of every value of an int64 ndarray (numpy's // rounds toward minus infinity, as
    Python's does). Not ``ts - (ts - offset) % width``: numpy computes that % in place in its
    temporary, six times slower."""
    return (ts - offset) // width * width + offset


def int64s(values: pa.Array | int) -> np.ndarray | int | None:
    """An int as it is, an int64 array without nulls as an ndarray (no copy); None otherwise."""
    if isinstance(values, int):
        return values
    if values.null_count or not pa.types.is_int64(values.type):
        return None
    return numpy_values(values)


def align_array(ts: pa.Array, width: int, offset: int) -> pa.Array:
    """``align`` of every value of an int64 array (vectorised; integer division truncates).
    The ints are passed as typed scalars: an untyped one makes pyarrow import pandas."""
    width_, zero = scalar(width), scalar(0)
    shifted = pc.subtract(ts, scalar(offset))
    remainder = pc.subtract(shifted, pc.multiply(pc.divide(shifted, width_), width_))
    remainder = pc.if_else(pc.less(remainder, zero), pc.add(remainder, width_), remainder)
    return pc.subtract(ts, remainder)


#: Past this many period boundaries between the lowest and highest value, ``stepped`` gives up
#: (the caller then compares per row).
STEPPED_MAX_STEPS = 4


def stepped(values: pa.Array | int, low: int, high: int, shift: int, width: int, offset: int) -> pa.Array | int | None:
    """``align(v + shift, width, offset) + width`` for every value ``v`` (an int64 array whose
    values lie in ``[low, high]``, nulls staying null; or an int). The result is a step function
    of ``v``: one int where every value falls in the same period (the usual case: the watermarks a
    batch met span less than a window), else per row from the few period boundaries between
    ``low`` and ``high`` (two passes per boundary, not an alignment of every value); None past
    ``STEPPED_MAX_STEPS`` boundaries (e.g. a row that met no watermark yet: ``v`` is the
    smallest int64, which ``v + shift`` would wrap)."""
    if isinstance(values, int):
        return align(values + shift, width, offset) + width
    first = align(low + shift, width, offset) + width
    last = align(high + shift, width, offset) + width
    steps = (last - first) // width
    if steps == 0:
        return first
    if steps > STEPPED_MAX_STEPS:
        return None
    result = pc.if_else(pc.is_valid(values), pa.scalar(first, pa.int64()), pa.scalar(None, pa.int64()))
    for step in range(1, steps + 1):
        value = first + step * width
        # v + shift reaches the period starting at value - width from this v on
        result = pc.if_else(pc.greater_equal(values, scalar(value - width - shift)), scalar(value), result)
    return result


@dataclass(frozen=True)
class SliceWindows:
    """The windows a slice is part of, as SQL over its start column.

    ``source`` is a FROM item to join to each slice (None: one window per
    slice); ``start`` and ``end`` are the window bounds; ``where`` keeps the
    windows that exist (None: all).
    """

    source: str | None
    start: str
    end: str
    where: str | None = None


class SlicedWindows:
    """Windows made of slices of ``slice_size`` µs, aligned to the epoch plus ``offset``."""

    kind = ""

    def __init__(self, time_column: str, size: int, slice_size: int, offset: int = 0):
        self.time_column = time_column
        self.size = size
        self.slice_size = slice_size
        self.offset = offset
        #: Windows a slice is part of at most (1: TUMBLE, each slice is its window).
        self.windows_per_slice = size // slice_size

    # -- assigning rows -------------------------------------------------
    def slice_start(self, ts: int) -> int:
        return align(ts, self.slice_size, self.offset)

    def windows_sql(self, slice_sql: str) -> SliceWindows:
        raise NotImplementedError

    # -- firing ----------------------------------------------------------
    def last_fired_slice(self, watermark: int) -> int:
        """Every slice starting at or before this is part of a window that has fired.

        A slice's first window ends with the slice, and fires when
        ``slice_end - 1 ms <= watermark``.
        """
        return self.slice_start(watermark - self.slice_size + WINDOW_TIME_LAG_US)

    def last_expired_slice(self, watermark: int) -> int:
        """Every slice starting at or before this has had all its windows fired: its
        state can go, and rows in it are late."""
        raise NotImplementedError

    def first_open_slice(self, watermark: int) -> int:
        """Rows before this timestamp belong only to windows that have fired: they are late."""
        return self.last_expired_slice(watermark) + self.slice_size

    def first_unfired_slice(self, watermark: int) -> int:
        """The first slice none of whose windows has fired under ``watermark``: rows before it met
        a watermark that fired some (or all) of their slice's windows."""
        return self.last_fired_slice(watermark) + self.slice_size

    def _expiry_period(self) -> int:
        """The width of the periods ``first_open_slice`` steps by (the slice; CUMULATE: the size)."""
        return self.slice_size

    def late(self, ts: pa.Array, watermarks: pa.Array | int, low: int, high: int) -> pa.BooleanArray:
        """Per row (int64 µs times ``ts``; the watermark each met, of values in ``[low, high]``,
        or one for all): whether every window of its slice has fired under its watermark — its
        time is before ``first_open_slice`` of it. That bound is a step function of the
        watermark (``stepped``): one comparison per row while the batch's watermarks do not
        cross a slice boundary."""
        opens = stepped(watermarks, low, high, WINDOW_TIME_LAG_US - self.size, self._expiry_period(), self.offset)
        if opens is not None:
            return pc.fill_null(pc.less(ts, typed(opens)), False)
        times, marks = int64s(ts), int64s(watermarks)
        if times is None or marks is None:  # NULLs: pyarrow's kernels carry them
            return pc.fill_null(pc.less_equal(self.expires_at(ts), typed(watermarks)), False)
        # Row by row, in numpy: a batch merged from source batches often spans more slices than
        # ``stepped`` takes, and numpy does this in five passes where pyarrow took a dozen.
        return arrow_array(self._last_window_end_numpy(times) - WINDOW_TIME_LAG_US <= marks)

    def first_windows(self, ts: pa.Array, watermarks: pa.Array | int, low: int, high: int) -> pa.Array | None:
        """Per row (as ``late``, of rows that are not): the end of the first window of its slice
        that has not fired under its watermark where an earlier one has, else NULL; None when no
        row met a watermark that fired one of its windows."""
        if self.windows_per_slice == 1:  # TUMBLE: a row whose window fired is late
            return None
        unfired = stepped(watermarks, low, high, WINDOW_TIME_LAG_US - self.slice_size, self.slice_size, self.offset)
        if unfired is None:
            times, marks = int64s(ts), int64s(watermarks)
            if times is not None and marks is not None:
                return self._first_windows_numpy(times, marks)
        if unfired is None:  # the first window of the row's slice ends - 1 ms at or before its watermark
            first_end = pc.add(align_array(ts, self.slice_size, self.offset),
                               scalar(self.slice_size - WINDOW_TIME_LAG_US))
            started = pc.less_equal(first_end, typed(watermarks))
            unfired = align_array(pc.add(watermarks, scalar(WINDOW_TIME_LAG_US)), self.slice_size, self.offset)
        else:  # the row's slice is before the first one none of whose windows fired
            started = pc.less(ts, typed(unfired))
        started = pc.fill_null(started, False)
        if not pc.any(started).as_py():
            return None
        # the first window not fired ends a slice after the first slice none of whose windows fired
        after = (pa.scalar(unfired + self.slice_size, pa.int64()) if isinstance(unfired, int)
                 else pc.add(unfired, scalar(self.slice_size)))
        return pc.if_else(started, after, pa.scalar(None, pa.int64()))

    def _first_windows_numpy(self, times: np.ndarray, marks: np.ndarray | int) -> pa.Array | None:
        """``first_windows`` row by row, in numpy, for times and watermarks without NULLs."""
        first_end = align_numpy(times, self.slice_size, self.offset) + (self.slice_size - WINDOW_TIME_LAG_US)
        started = first_end <= marks
        if not started.any():
            return None
        # A watermark that met no row yet is the smallest int64: its sum below wraps, as
        # pyarrow's did, and its rows never started.
        after = align_numpy(np.asarray(marks + WINDOW_TIME_LAG_US), self.slice_size, self.offset) + self.slice_size
        return arrow_array(np.broadcast_to(after, times.shape), mask=~started)

    def expires_at(self, ts: pa.Array) -> pa.Array:
        """Per row (int64 µs times): the watermark at which the last window of its slice fires.
        A row is late when the watermark it meets has reached this (``ts < first_open_slice(w)``,
        row by row)."""
        return pc.subtract(self._last_window_end(ts), scalar(WINDOW_TIME_LAG_US))

    def _last_window_end(self, ts: pa.Array) -> pa.Array:
        # a row's last window ends ``size`` after the start of its expiry period (TUMBLE, HOP:
        # its slice; CUMULATE: its size-aligned period, whose full-size window is the last)
        return pc.add(align_array(ts, self._expiry_period(), self.offset), scalar(self.size))

    def _last_window_end_numpy(self, times: np.ndarray) -> np.ndarray:
        return align_numpy(times, self._expiry_period(), self.offset) + self.size

    def describe(self) -> str:
        return f"{self.kind}({self.time_column})"


class TumblingWindows(SlicedWindows):
    """Fixed-size, non-overlapping windows: one slice each."""

    kind = "tumble"

    def __init__(self, time_column: str, size: int, offset: int = 0):
        super().__init__(time_column, size, size, offset)

    def windows_sql(self, slice_sql: str) -> SliceWindows:
        return SliceWindows(None, slice_sql, f"({slice_sql} + {self.size})")

    def last_expired_slice(self, watermark: int) -> int:
        return self.last_fired_slice(watermark)


class HoppingWindows(SlicedWindows):
    """Windows of ``size`` every ``slide`` (``size`` a multiple of ``slide``): slices of
    ``slide``, each part of the ``size / slide`` windows ending 1, 2, ... slides after it starts."""

    kind = "hop"

    def __init__(self, time_column: str, size: int, slide: int, offset: int = 0):
        super().__init__(time_column, size, slide, offset)

    def windows_sql(self, slice_sql: str) -> SliceWindows:
        end = f"({slice_sql} + {self.slice_size} * (__window_index + 1))"
        return SliceWindows(
            f"range({self.windows_per_slice}) AS __windows(__window_index)",
            f"({end} - {self.size})",
            end,
        )

    def last_expired_slice(self, watermark: int) -> int:
        # a slice's last window ends ``size`` after the slice starts
        return self.slice_start(watermark - self.size + WINDOW_TIME_LAG_US)


class CumulativeWindows(SlicedWindows):
    """Windows growing by ``step`` from a ``size``-aligned start up to ``size``: slices of
    ``step``; a slice is part of every window of its period that ends after it starts."""

    kind = "cumulate"

    def __init__(self, time_column: str, size: int, step: int, offset: int = 0):
        super().__init__(time_column, size, step, offset)
        self.windows_per_period = size // step

    def windows_sql(self, slice_sql: str) -> SliceWindows:
        start = align_sql(slice_sql, self.size, self.offset)
        end = f"({slice_sql} + {self.slice_size} * (__window_index + 1))"
        return SliceWindows(
            f"range({self.windows_per_period}) AS __windows(__window_index)",
            start,
            end,
            f"{end} <= {start} + {self.size}",
        )

    def last_expired_slice(self, watermark: int) -> int:
        # every slice of a period expires with the period's last (full-size) window
        period = align(watermark - self.size + WINDOW_TIME_LAG_US, self.size, self.offset)
        return period + self.size - self.slice_size

    def _expiry_period(self) -> int:
        return self.size


@dataclass(frozen=True)
class SlicedWindowConfig(OperatorConfig):
    """A TUMBLE, HOP or CUMULATE window of a config: sizes in µs (``slide`` for HOP, ``step``
    for CUMULATE, both dividing the size)."""

    kind: str
    time_column: str
    size: int
    offset: int = 0
    slide: int | None = optional()
    step: int | None = optional()


def window_assigner(window: SlicedWindowConfig, operator_id: str) -> SlicedWindows:
    """Build the assigner that a ``window`` config names (sizes in µs)."""
    kind = str(window.kind).lower()
    if kind not in ("tumble", "hop", "cumulate"):
        raise EngineError(
            f"window kind {window.kind!r} is not supported by the sliced window aggregate",
            hint="sliced windows: tumble, hop, cumulate (session windows have an operator of their own)",
            operator_id=operator_id,
        )
    size, offset = int(window.size), int(window.offset or 0)
    _check_positive("window size", size, operator_id)
    if kind == "tumble":
        return TumblingWindows(window.time_column, size, offset)
    name = "slide" if kind == "hop" else "step"
    if getattr(window, name) is None:
        raise EngineError(f"a {kind} window config needs {name!r}", operator_id=operator_id)
    part = int(getattr(window, name))
    _check_positive(f"window {name}", part, operator_id)
    if size % part:
        raise EngineError(
            f"{kind.upper()} window size {size} µs is not a multiple of its {name} {part} µs",
            hint=f"make the size an integral multiple of the {name}",
            operator_id=operator_id,
        )
    cls = HoppingWindows if kind == "hop" else CumulativeWindows
    return cls(window.time_column, size, part, offset)


def _check_positive(what: str, value: int, operator_id: str) -> None:
    if value <= 0:
        raise EngineError(f"{what} must be positive, got {value} µs", operator_id=operator_id)


def event_times(batch: pa.RecordBatch, name: str, operator_id: str,
                window: str = "window") -> tuple[pa.RecordBatch, pa.Array]:
    """``batch`` with its time column ``name`` in µs (cast from another unit, time zone kept),
    and that column as int64 (a zero-copy view). A missing column, or one that is not a
    timestamp, is an error naming the ``window``'s time column."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        raise EngineError(f"the {window}'s time column {name!r} is not in the input",
                          hint=f"input columns: {batch.schema.names}", operator_id=operator_id)
    column = batch.column(index)
    if not pa.types.is_timestamp(column.type):
        raise EngineError(f"the {window}'s time column {name!r} is {column.type}, not a timestamp",
                          operator_id=operator_id)
    if column.type.unit != "us":
        column = column.cast(pa.timestamp("us", column.type.tz))
        batch = batch.set_column(index, batch.schema.field(index).with_type(column.type), column)
    return batch, column.view(pa.int64())

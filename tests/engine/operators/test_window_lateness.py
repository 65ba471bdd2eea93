"""Which rows of a batch are late, and where a row's first unfired window ends, row by row.

``SlicedWindows.late`` and ``first_windows`` take a fast path where the watermarks the rows met
fall in a few slices (``stepped``) and compute per row otherwise: in numpy for times and
watermarks without NULLs, in pyarrow with them. Every path must give what the definitions say,
row by row, for any window, offset and spread of watermarks (including rows that met no
watermark yet: the smallest int64).
"""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.messages import MIN_WATERMARK
from weir.engine.operators.windows import WINDOW_TIME_LAG_US, SlicedWindowConfig, window_assigner

SECOND = 1_000_000
LAG = WINDOW_TIME_LAG_US


def align(ts: int, width: int, offset: int) -> int:
    return ts - (ts - offset) % width


def windows_of(ts: int, kind: str, size: int, slice_size: int, offset: int) -> list[int]:
    """The ends of every window holding ``ts``, from the window's definition."""
    if kind == "cumulate":
        start = align(ts, size, offset)
        return [end for end in range(start + slice_size, start + size + 1, slice_size) if end > ts]
    return [end for end in range(align(ts, slice_size, offset) + slice_size, ts + size + 1, slice_size)
            if end - size <= ts < end]


@st.composite
def cases(draw):
    kind = draw(st.sampled_from(["tumble", "hop", "cumulate"]))
    slice_size = draw(st.integers(1, 4)) * SECOND
    size = slice_size * (1 if kind == "tumble" else draw(st.integers(1, 5)))
    offset = draw(st.integers(-3, 3)) * SECOND // 2
    n = draw(st.integers(1, 40))
    base = 1_700_000_000 * SECOND
    # on a grid of a quarter second, and a millisecond before one: windows' bounds are met exactly
    on_grid = st.builds(lambda q, lag: base + q * SECOND // 4 - lag, st.integers(-40, 240), st.sampled_from([0, LAG]))
    times = draw(st.lists(st.one_of(on_grid, st.integers(base, base + 60 * SECOND)), min_size=n, max_size=n))
    # watermarks spread over up to a minute (many slices: the per-row path), or not started
    marks = draw(st.lists(st.one_of(on_grid, st.integers(base - 10 * SECOND, base + 60 * SECOND),
                                    st.just(MIN_WATERMARK)), min_size=n, max_size=n))
    marks[0] = draw(on_grid)  # the operator asks once a watermark started
    # a watermark at a row's last window end less 1 ms (late), or 1 µs before; the same at its first
    for pick in (max, min):
        i = draw(st.integers(0, n - 1))
        marks[i] = pick(windows_of(times[i], kind, size, slice_size, offset)) - LAG - draw(st.sampled_from([0, 1]))
    with_null = draw(st.booleans())  # a NULL time takes pyarrow's path
    return kind, size, slice_size, offset, times, marks, with_null


@settings(max_examples=300, deadline=None)
@given(cases())
def test_late_rows_and_first_unfired_windows_are_those_of_the_definitions(case):
    kind, size, slice_size, offset, times, marks, with_null = case
    window = {"kind": kind, "time_column": "ts", "size": size, "offset": offset}
    if kind == "hop":
        window["slide"] = slice_size
    if kind == "cumulate":
        window["step"] = slice_size
    assigner = window_assigner(SlicedWindowConfig(**window), "op")
    ts = pa.array(times + ([None] if with_null else []), pa.int64())
    watermarks = pa.array(marks + ([MIN_WATERMARK] if with_null else []), pa.int64())
    low, high = min(marks), max(marks)

    late = assigner.late(ts, watermarks, low, high).to_pylist()
    first = assigner.first_windows(ts, watermarks, low, high)
    first = first.to_pylist() if first is not None else [None] * len(ts)

    for i, (t, w) in enumerate(zip(times, marks)):
        ends = windows_of(t, kind, size, slice_size, offset)
        fired = [end for end in ends if end - LAG <= w]
        assert late[i] == (len(fired) == len(ends)), (i, t, w, ends)
        if kind == "tumble" or not fired or late[i]:
            assert first[i] is None or late[i], (i, t, w, ends, first[i])
        else:  # some of its windows fired: it counts from the first that has not
            assert first[i] == min(end for end in ends if end - LAG > w), (i, t, w, ends, first[i])
    if with_null:
        assert late[-1] is False and first[-1] is None

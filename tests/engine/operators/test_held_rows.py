"""HeldRows: a firing takes exactly the rows of the windows it fires, however they were batched."""
from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.operators.held_rows import HeldRows


def batch(ends: list[int], first: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ends, pa.int64()), pa.array(range(first, first + len(ends)), pa.int64())],
                           names=["__window_end", "c0"])


def rows(batches: list[pa.RecordBatch]) -> list[tuple[int, int]]:
    return [(r["__window_end"], r["c0"]) for b in batches for r in b.to_pylist()]


@given(ends=st.lists(st.integers(0, 9), max_size=60), cuts=st.lists(st.integers(1, 12), min_size=1),
       sort=st.booleans(), uptos=st.lists(st.integers(-1, 10), max_size=4))
@settings(max_examples=200, deadline=None)
def test_firings_take_the_rows_at_or_below_upto_in_their_order(ends, cuts, sort, uptos):
    """In window order (slices) or not (filters): what fires, then what stays, are the rows."""
    if sort:
        ends = sorted(ends)
    held, at, i = HeldRows(), 0, 0
    while at < len(ends):
        n = cuts[i % len(cuts)]
        held.add(batch(ends[at:at + n], at))
        at, i = at + n, i + 1
    remaining = list(zip(ends, range(len(ends))))
    for upto in sorted(uptos):
        fired, rest = held.split(upto)
        assert rows(fired) == [r for r in remaining if r[0] <= upto]
        held.keep(rest)
        remaining = [r for r in remaining if r[0] > upto]
        assert rows(held.batches()) == remaining
        assert held.earliest_end() == min((e for e, _ in remaining), default=None)
    assert rows(held.take()) == remaining
    assert not held and held.nbytes == 0

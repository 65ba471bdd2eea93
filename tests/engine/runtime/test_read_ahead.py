"""A source read ahead in a thread hands on the same items, errors where they were raised, and
stops reading when its consumer closes it."""
from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings, strategies as st

from weir.engine.runtime.read_ahead import ReadAhead


@settings(max_examples=30, deadline=None)
@given(items=st.lists(st.integers()), depth=st.integers(1, 4))
def test_items_arrive_in_order_and_complete(items, depth):
    assert list(ReadAhead(iter(items), depth=depth)) == items


def test_an_error_is_raised_after_the_items_before_it():
    def items():
        yield 1
        yield 2
        raise ValueError("malformed row in 'f.csv' at line 3")

    ahead = ReadAhead(items())
    assert next(ahead) == 1
    assert next(ahead) == 2
    with pytest.raises(ValueError, match="line 3"):
        next(ahead)


def test_close_stops_the_reading_and_closes_the_iterator():
    produced, closed = [], threading.Event()

    def items():
        try:
            for i in range(1_000_000):
                produced.append(i)
                yield i
        finally:
            closed.set()

    ahead = ReadAhead(items(), depth=2)
    assert next(ahead) == 0
    ahead.close()
    assert closed.is_set()  # the generator's cleanup (a file's close) ran
    assert len(produced) <= 4  # the one consumed, the queue's two and the one waiting for room

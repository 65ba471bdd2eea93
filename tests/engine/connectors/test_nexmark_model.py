"""The nexmark generator's numpy parts against references: SplitMix64 and its draws against
the pyarrow functions they replaced (state.key_groups.splitmix64 and wrapping uint64 kernels),
a split's timeline against its defining formula, and a pick of strings against Arrow's take.
Any difference would change the rows every seed gives (the generator must be rewindable
and stable across versions)."""
from __future__ import annotations

from math import gcd

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from weir.engine.connectors.nexmark import SplitTimeline
from weir.engine.connectors import nexmark_model
from weir.engine.connectors.nexmark_model import (
    Draws, Proportions, exact_price, extra_lengths, price, random_active_person, random_in_flight_auction,
)
from weir.engine.connectors.nexmark_strings import Strings
from weir.engine.state.key_groups import splitmix64, splitmix64_int, splitmix64_numpy

U64 = st.integers(0, 2**64 - 1)
EDGES = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1]


@settings(deadline=None)  # no timing assertions: a first call warms pyarrow's kernels
@given(st.lists(U64, min_size=1, max_size=50))
def test_splitmix64_array_is_the_pyarrow_and_the_python_splitmix64(values):
    values = values + EDGES
    got = splitmix64_numpy(np.array(values, np.uint64)).tolist()
    assert got == splitmix64(pa.array(values, pa.uint64())).to_pylist()
    assert got == [splitmix64_int(v) for v in values]


def _reference_uniform(event_ids: list[int], seed: int, word: int, bound) -> list[int]:
    """The draw as the pyarrow generator made it: the ``word``-th 32-bit half of the hash chain,
    times the bound (wrapping at 64 bits), shifted right by 32."""
    h = splitmix64(pc.bit_wise_xor(pa.array(event_ids, pa.uint64()), pa.scalar(splitmix64_int(seed), pa.uint64())))
    for _ in range(word // 2):
        h = splitmix64(h)
    half = (pc.bit_wise_and(h, pa.scalar(0xFFFFFFFF, pa.uint64())) if word % 2 == 0
            else pc.shift_right(h, pa.scalar(32, pa.uint64())))
    bound = pc.cast(pa.array(bound), pa.uint64()) if isinstance(bound, list) else pa.scalar(bound, pa.uint64())
    return pc.shift_right(pc.multiply(half, bound), pa.scalar(32, pa.uint64())).to_pylist()


@settings(max_examples=60, deadline=None)
@given(event_ids=st.lists(st.integers(0, 2**62), min_size=1, max_size=40), seed=st.integers(0, 2**40),
       word=st.integers(0, 9), bounds=st.lists(st.integers(1, 2**40), min_size=40, max_size=40))
def test_draws_are_the_pyarrow_draws(event_ids, seed, word, bounds):
    """Bounds past 2**32 make the product wrap, as Arrow's uint64 multiply did."""
    draws = Draws(np.array(event_ids, np.int64), seed)
    for bound in (bounds[0], bounds[: len(event_ids)]):
        drawn = draws.uniform(word, bound if isinstance(bound, int) else np.array(bound, np.int64))
        assert drawn.dtype == np.int64
        assert drawn.tolist() == _reference_uniform(event_ids, seed, word, bound)


@settings(max_examples=80, deadline=None)
@given(proportions=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 60)),
       splits=st.integers(1, 64), data=st.data(), kind=st.sampled_from(["person", "auction", "bid"]))
def test_a_timeline_slices_the_events_its_formula_defines(proportions, splits, data, kind):
    """Row j is at k = (j // R) * period + residues[j % R], event id k * splits + split; batches
    of any size, from any row (far ones too), in any order."""
    p = Proportions(*proportions)
    split = data.draw(st.integers(0, splits - 1))
    timeline = SplitTimeline(split, splits, p, kind)
    if not timeline.residues:
        return
    period, count = p.total // gcd(splits, p.total), len(timeline.residues)
    for _ in range(3):
        first = data.draw(st.one_of(st.integers(0, 500), st.integers(0, 10**12)))
        size = data.draw(st.integers(1, 300))
        events = timeline.events(first, size)
        k = [(j // count) * period + timeline.residues[j % count] for j in range(first, first + size)]
        ids = [x * splits + split for x in k]
        assert events.k.tolist() == k
        assert events.event_ids.tolist() == ids
        assert events.epoch.tolist() == [e // p.total for e in ids]
        assert events.offset.tolist() == [e % p.total for e in ids]


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)


@settings(deadline=None)
@given(strings=st.lists(TEXT, min_size=1, max_size=40), data=st.data())
def test_a_pick_is_arrows_take(strings, data):
    """Short strings (inline in their view) and long ones, of a pool sliced out of a larger array too."""
    whole = pa.array(["before", *strings, "after, and longer than twelve bytes"], pa.string())
    for pool in (pa.array(strings, pa.string()), whole.slice(1, len(strings))):
        index = data.draw(st.lists(st.integers(0, len(strings) - 1), min_size=1, max_size=60))
        picked = Strings(pool).pick(np.array(index, np.int64))
        expected = pool.take(pa.array(index, pa.int64()))
        assert picked.type == pa.string() and picked.null_count == 0
        assert picked.equals(expected)
        assert picked.buffers()[1].to_pybytes() == expected.buffers()[1].to_pybytes()
        assert picked.buffers()[2].to_pybytes() == expected.buffers()[2].to_pybytes()


def test_a_price_from_the_tables_is_the_price_arrows_power_gives():
    """``price`` rounds a product of two tables and has ``exact_price`` (Arrow's power) compute
    the rows near a .5; over 2M words, the edges of the range and words on both paths, every
    price is the exact one."""
    draws = Draws(np.arange(2_000_000, dtype=np.int64), 11)
    drawn = draws.word(4)
    drawn[:4] = [0, 1, 2**32 - 2, 2**32 - 1]
    draws.word = lambda i: drawn.copy()  # the words above, edges included
    got = price(draws, 4)
    assert got.dtype == np.int64
    assert np.array_equal(got, exact_price(drawn))
    assert got[0] == 100 and got[3] == 100_000_000
    power = np.take(nexmark_model._PRICE_HIGH, drawn >> np.uint64(16)) * np.take(
        nexmark_model._PRICE_LOW, drawn & np.uint64(0xFFFF))
    near = np.abs(power + 0.5 - np.floor(power + 0.5) - 0.5) > 0.5 - nexmark_model._NEAR_HALF
    assert 100 < near.sum() < 10_000  # the exact path ran, for few rows


def test_a_price_near_a_half_is_the_exact_one_even_from_tables_a_little_off(monkeypatch):
    """Tables off by 1e-12 (100 times the error they have) round some prices wrongly on their
    own: the exact path must give every one of them back."""
    draws = Draws(np.arange(2_000_000, dtype=np.int64), 3)
    drawn = draws.word(4)
    monkeypatch.setattr(nexmark_model, "_PRICE_LOW", nexmark_model._PRICE_LOW * (1 + 1e-12))
    power = np.take(nexmark_model._PRICE_HIGH, drawn >> np.uint64(16)) * np.take(
        nexmark_model._PRICE_LOW, drawn & np.uint64(0xFFFF))
    exact = exact_price(drawn)
    assert (np.floor(power + 0.5).astype(np.int64) != exact).any()  # the tables alone are wrong
    assert np.array_equal(price(draws, 4), exact)


@settings(max_examples=60, deadline=None)
@given(event_ids=st.lists(st.integers(0, 2**62), min_size=1, max_size=40), seed=st.integers(0, 2**40),
       word=st.integers(0, 9), bound=st.one_of(st.sampled_from([1, 2, 3, 4, 2**31, 2**32 - 1, 2**32, 2**40]),
                                                st.integers(1, 2**40)))
def test_a_draw_above_zero_is_the_draw_compared(event_ids, seed, word, bound):
    draws = Draws(np.array(event_ids, np.int64), seed)
    assert draws.uniform_above_zero(word, bound).tolist() == (draws.uniform(word, bound) > 0).tolist()


def _reference_active_person(draws, word, last):
    people = last + 1
    active = np.minimum(people, 1000)
    return (people - active) + draws.uniform(word, active + 10)


def _reference_in_flight_auction(draws, word, last):
    low = np.maximum(last - 100, 0)
    return low + draws.uniform(word, (last - low) + 11)


@settings(max_examples=60, deadline=None)
@given(last=st.lists(st.one_of(st.integers(0, 1200), st.integers(0, 2**40)), min_size=1, max_size=40),
       seed=st.integers(0, 2**20))
def test_random_ids_past_the_start_are_those_of_the_general_rule(last, seed):
    """With every row past the first 1000 persons (100 auctions) the bound is one number; with
    some row before, the general rule runs: both give the general rule's ids."""
    last = np.array(last, np.int64)
    draws = Draws(np.arange(len(last), dtype=np.int64), seed)
    for rows in (last, last[last >= 999], last[last >= 100]):
        if len(rows):
            draws = Draws(np.arange(len(rows), dtype=np.int64), seed)
            assert random_active_person(draws, 3, rows).tolist() == _reference_active_person(draws, 3, rows).tolist()
            assert (random_in_flight_auction(draws, 1, rows).tolist()
                    == _reference_in_flight_auction(draws, 1, rows).tolist())


@settings(max_examples=40, deadline=None)
@given(event_ids=st.lists(st.integers(0, 2**62), min_size=1, max_size=40), seed=st.integers(0, 2**40),
       word=st.integers(0, 9), bits=st.integers(0, 34))
def test_a_draw_below_a_power_of_two_is_the_pyarrow_draw(event_ids, seed, word, bits):
    """Bounds 2**b draw by a shift alone (up to 2**32; past it the product wraps, the general way)."""
    drawn = Draws(np.array(event_ids, np.int64), seed).uniform(word, 1 << bits)
    assert drawn.dtype == np.int64
    assert drawn.tolist() == _reference_uniform(event_ids, seed, word, 1 << bits)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 700), min_size=1, max_size=30), seed=st.integers(0, 2**20),
       average=st.sampled_from([100, 200, 500, 3]))
def test_extra_lengths_for_one_size_are_those_for_an_array_of_it(sizes, seed, average):
    """A table whose other columns have a fixed size (bid) passes an int: the same lengths."""
    draws = Draws(np.arange(len(sizes), dtype=np.int64), seed)
    for size in sizes[:3]:
        expected = extra_lengths(draws, 7, np.full(len(sizes), size, np.int64), average)
        assert extra_lengths(draws, 7, size, average).tolist() == expected.tolist()

"""The Nexmark generator's rules, vectorised: random draws, ids, key skew, prices, extra's lengths.

Every random draw of an event is a function of (seed, event id) only, so a
batch can be generated for any range of event ids, in any order, with the
same result: that is what makes the nexmark source rewindable. The draws come
from SplitMix64 over numpy uint64 arrays (``state.key_groups.splitmix64_numpy``:
numpy's uint64 arithmetic wraps, as the hash needs), so they are stable across
processes, machines and library versions. Everything else is integer arithmetic, except a price's power of
ten, which Arrow's kernel computes exactly (``exact_price``; ``price`` reaches the same integers from two
tables).

The rules follow the Flink Nexmark suite's ``generator`` package (itself from
Apache Beam): see /work/shared/reference/nexmark-generator.md. Where Java
draws strings character by character, we pick from pools of strings built
once per seed with the same distribution (``nexmark_strings``).

Arrays here are int64 ndarrays and every operand is >= 0, so ``//`` and ``%``
are Java's integer division and remainder.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.pandas_import import arrow_array, numpy_values, scalar
from weir.engine.state.key_groups import splitmix64_int, splitmix64_numpy

FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
HOT_BLOCK = 100  # HOT_AUCTION_RATIO / HOT_BIDDER_RATIO / HOT_SELLER_RATIO in the suite
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS_NUMBER = 10_000
AVG_BYTES = {"person": 200, "auction": 500, "bid": 100}

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland",
             "Bend", "Redmond", "Seattle", "Kent", "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")

_MASK64 = 0xFFFFFFFFFFFFFFFF
_LOW32 = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)
_16 = np.uint64(16)
_LOW16 = np.uint64(0xFFFF)
#: 100 * 10^(6 * high / 2^16) and 10^(6 * low / 2^32) for the high and low 16 bits of a price's
#: draw word: their product is 100 * 10^(6 * word / 2^32) (``price``).
_PRICE_HIGH = 100.0 * 10.0 ** (np.arange(1 << 16, dtype=np.float64) * (6.0 / (1 << 16)))
_PRICE_LOW = 10.0 ** (np.arange(1 << 16, dtype=np.float64) * (6.0 / (1 << 32)))
#: How far from a .5 a price's product must be to round as the exact power does (``price``).
_NEAR_HALF = 2.0 ** -12


class Draws:
    """Independent 32-bit random words for each event id of a batch.

    Word ``i`` of an event is half of the ``i // 2``-th hash in the chain
    splitmix64(seed_key ^ event_id), splitmix64(that), ... Words are made on
    first use, so a projection that needs few columns hashes less.
    """

    def __init__(self, event_ids: np.ndarray, seed: int):
        key = np.uint64(splitmix64_int(seed))
        self._chain = [splitmix64_numpy(event_ids.view(np.uint64) ^ key)]  # event ids are >= 0

    def __len__(self) -> int:
        return len(self._chain[0])

    def _hash(self, i: int) -> np.ndarray:
        """The hash that word ``i`` is half of."""
        while len(self._chain) <= i // 2:
            self._chain.append(splitmix64_numpy(self._chain[-1]))
        return self._chain[i // 2]

    def word(self, i: int) -> np.ndarray:
        """As uint64 (below 2**32)."""
        h = self._hash(i)
        return h & _LOW32 if i % 2 == 0 else h >> _32

    def uniform(self, i: int, bound: int | np.ndarray) -> np.ndarray:
        """Integers uniform in [0, bound) (bound: an int, or int64 values >= 0), as int64:
        (word * bound) >> 32, the product wrapping at 64 bits: for bound 2**b (b <= 32), word >> (32 - b)."""
        if isinstance(bound, int) and 1 < bound <= 1 << 32 and bound & (bound - 1) == 0:
            h, bits = self._hash(i), bound.bit_length() - 1
            if i % 2:
                return (h >> np.uint64(64 - bits)).view(np.int64)
            drawn = h & _LOW32
            drawn >>= np.uint64(32 - bits)
            return drawn.view(np.int64)
        bound = np.uint64(bound & _MASK64) if isinstance(bound, int) else np.asarray(bound).astype(np.uint64)
        drawn = self.word(i)  # a new array: the steps run in place
        drawn *= bound
        drawn >>= _32
        return drawn.view(np.int64)  # below 2**32

    def uniform_above_zero(self, i: int, bound: int) -> np.ndarray:
        """``uniform(i, bound) > 0``, as a bool array: for 0 < bound < 2**32 the product does not
        wrap, so it is word * bound >= 2**32, i.e. word >= ceil(2**32 / bound), one comparison."""
        if not 0 < bound < 1 << 32:
            return self.uniform(i, bound) > 0
        if bound == 1:
            return np.zeros(len(self), bool)
        least = -(-(1 << 32) // bound)  # at most 2**31
        h = self._hash(i)
        return (h & _LOW32) >= np.uint64(least) if i % 2 == 0 else h >= np.uint64(least << 32)


def java_round(x: np.ndarray) -> np.ndarray:
    """Math.round: floor(x + 0.5), as int64."""
    return np.floor(x + 0.5).astype(np.int64)


@dataclass(frozen=True)
class Proportions:
    person: int = 1
    auction: int = 3
    bid: int = 46

    @property
    def total(self) -> int:
        return self.person + self.auction + self.bid

    def kind_range(self, kind: str) -> tuple[int, int]:
        """Which values of ``event_id % total`` are events of ``kind``."""
        p, a = self.person, self.auction
        return {"person": (0, p), "auction": (p, p + a), "bid": (p + a, self.total)}[kind]

    def last_person_id(self, epoch: np.ndarray, offset: np.ndarray, kind: str) -> np.ndarray:
        """lastBase0PersonId for events of ``kind`` (event id = epoch * total + offset): the
        newest person so far."""
        if kind == "person":
            return epoch * self.person + offset
        return epoch * self.person + (self.person - 1)

    def last_auction_id(self, epoch: np.ndarray, offset: np.ndarray, kind: str) -> np.ndarray:
        """lastBase0AuctionId for events of ``kind`` (event id = epoch * total + offset): the
        newest auction so far."""
        if kind == "auction":
            return epoch * self.auction + (offset - self.person)
        return epoch * self.auction + (self.auction - 1)


def random_active_person(draws: Draws, word: int, last_person: np.ndarray) -> np.ndarray:
    """nextBase0PersonId: uniform over the last 1000 persons plus a lead of 10."""
    if len(last_person) and last_person.min() >= NUM_ACTIVE_PEOPLE - 1:  # 1000 persons before each row
        chosen = draws.uniform(word, NUM_ACTIVE_PEOPLE + PERSON_ID_LEAD)
        chosen += last_person
        chosen -= NUM_ACTIVE_PEOPLE - 1
        return chosen
    people = last_person + 1
    active = np.minimum(people, NUM_ACTIVE_PEOPLE)
    return (people - active) + draws.uniform(word, active + PERSON_ID_LEAD)


def random_in_flight_auction(draws: Draws, word: int, last_auction: np.ndarray) -> np.ndarray:
    """nextBase0AuctionId: uniform over [last - 100, last + 10]."""
    if len(last_auction) and last_auction.min() >= NUM_IN_FLIGHT_AUCTIONS:  # no row near the first auction
        chosen = draws.uniform(word, NUM_IN_FLIGHT_AUCTIONS + 1 + AUCTION_ID_LEAD)
        chosen += last_auction
        chosen -= NUM_IN_FLIGHT_AUCTIONS
        return chosen
    low = np.maximum(last_auction - NUM_IN_FLIGHT_AUCTIONS, 0)
    span = (last_auction - low) + (1 + AUCTION_ID_LEAD)
    return low + draws.uniform(word, span)


def hot_or(draws: Draws, word: int, ratio: int, hot: np.ndarray, other: np.ndarray) -> np.ndarray:
    """``hot`` with probability 1 - 1/ratio (Java: random.nextInt(ratio) > 0), else ``other``."""
    return np.where(draws.uniform_above_zero(word, ratio), hot, other)


def price(draws: Draws, word: int) -> np.ndarray:
    """round(100 * 10^(6u)): log-uniform over [100, 10^8] cents, exactly as ``exact_price``.

    With u = word / 2^32, 100 * 10^(6u) is ``_PRICE_HIGH[word >> 16] * _PRICE_LOW[word & 0xFFFF]``
    (the exponent split in two exactly), a few units in the last place from what Arrow's power
    gives: at most 1e-6 for prices up to 10^8, far less than ``_NEAR_HALF``. Rounding y - _NEAR_HALF
    and y + _NEAR_HALF gives the same integer for all but ~5 rows in 10,000, so the exact value
    rounds to it too (rounding is monotonic); those few ``exact_price`` computes. A third of the
    time of Arrow's power over every row."""
    drawn = draws.word(word)
    # (int64 indices: numpy converts uint64 ones first, which took 9 times as long as the take)
    power = np.take(_PRICE_HIGH, (drawn >> _16).view(np.int64))
    power *= np.take(_PRICE_LOW, (drawn & _LOW16).view(np.int64))
    rounded = (power + (0.5 - _NEAR_HALF)).astype(np.int64)  # floor: every value is > 0
    near = np.flatnonzero(rounded != (power + (0.5 + _NEAR_HALF)).astype(np.int64))
    if len(near):
        rounded[near] = exact_price(drawn[near])
    return rounded


def exact_price(drawn: np.ndarray) -> np.ndarray:
    """round(100 * 10^(6u)) for draw words ``drawn`` (u = word / 2^32), Arrow's kernel taking the
    power, as it always has: numpy's may round the last bit otherwise on some CPUs (SIMD builds)."""
    tens = numpy_values(pc.power(scalar(10.0), arrow_array(drawn.astype(np.float64) / 4294967296.0 * 6.0)))
    return java_round(tens * 100.0)


def extra_lengths(draws: Draws, word: int, current_size: int | np.ndarray, average: int) -> np.ndarray:
    """nextExtra's length: about ``average - current_size``, +-20%."""
    if isinstance(current_size, int):  # (Python's floats are numpy's float64: the same rounding)
        desired = max(average - current_size, 0)
        delta = math.floor(desired * 0.2 + 0.5)
        if delta == 0:
            return np.full(len(draws), desired, np.int64)
        lengths = draws.uniform(word, 2 * delta)
        lengths += desired - delta
        return lengths
    desired = np.maximum(average - np.asarray(current_size, np.int64), 0)
    delta = java_round(desired * 0.2)
    low = desired - delta
    spread = np.maximum(delta * 2, 1)
    return np.where(delta == 0, low, low + draws.uniform(word, spread))

"""The Nexmark generator's rules, vectorised: ids, key skew, prices, strings.

Every random draw of an event is a function of (seed, event id) only, so a
batch can be generated for any range of event ids, in any order, with the
same result: that is what makes the nexmark source rewindable. The draws come
from SplitMix64 written with pyarrow compute (wrapping uint64 arithmetic), so
they are stable across processes, machines and library versions.

The rules follow the Flink Nexmark suite's ``generator`` package (itself from
Apache Beam): see /work/shared/reference/nexmark-generator.md. Where Java
draws strings character by character, we draw from pools of strings built
once per seed with the same distribution (``StringPools``).
"""
from __future__ import annotations

import random
import zlib
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.pandas_import import scalar
from weir.engine.state.key_groups import splitmix64, splitmix64_int

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

_U64 = pa.uint64()


def _u(value: int) -> pa.Scalar:
    return pa.scalar(value & 0xFFFFFFFFFFFFFFFF, _U64)


class Draws:
    """Independent 32-bit random words for each event id of a batch.

    Word ``i`` of an event is half of the ``i // 2``-th hash in the chain
    splitmix64(seed_key ^ event_id), splitmix64(that), ... Words are made on
    first use, so a projection that needs few columns hashes less.
    """

    def __init__(self, event_ids: pa.Array, seed: int):
        self._chain = [splitmix64(pc.bit_wise_xor(pc.cast(event_ids, _U64), _u(splitmix64_int(seed))))]

    def word(self, i: int) -> pa.Array:
        while len(self._chain) <= i // 2:
            self._chain.append(splitmix64(self._chain[-1]))
        h = self._chain[i // 2]
        return pc.bit_wise_and(h, _u(0xFFFFFFFF)) if i % 2 == 0 else pc.shift_right(h, _u(32))

    def uniform(self, i: int, bound) -> pa.Array:
        """Integers uniform in [0, bound) (bound: int or int64 array), as int64."""
        if isinstance(bound, pa.Scalar):
            bound = bound.as_py()
        bound = pc.cast(bound, _U64) if isinstance(bound, (pa.Array, pa.ChunkedArray)) else _u(bound)
        return pc.cast(pc.shift_right(pc.multiply(self.word(i), bound), _u(32)), pa.int64())

    def unit(self, i: int) -> pa.Array:
        """Doubles uniform in [0, 1)."""
        return pc.divide(pc.cast(self.word(i), pa.float64()), scalar(4294967296.0))


def _arrow(value):
    """A Python number as the scalar pyarrow would make of it; an Arrow value as it is."""
    return scalar(value) if isinstance(value, (int, float)) else value


def div(x, d):
    return pc.divide(_arrow(x), _arrow(d))  # integer division; every operand here is >= 0


def mod(x, d):
    x, d = _arrow(x), _arrow(d)
    return pc.subtract(x, pc.multiply(pc.divide(x, d), d))


def java_round(x: pa.Array) -> pa.Array:
    """Math.round: floor(x + 0.5), as int64."""
    return pc.cast(pc.floor(pc.add(x, scalar(0.5))), pa.int64())


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

    def last_person_id(self, event_ids: pa.Array, kind: str) -> pa.Array:
        """lastBase0PersonId for events of ``kind``: the newest person so far."""
        epoch, offset = div(event_ids, self.total), mod(event_ids, self.total)
        if kind == "person":
            return pc.add(pc.multiply(epoch, scalar(self.person)), offset)
        return pc.add(pc.multiply(epoch, scalar(self.person)), scalar(self.person - 1))

    def last_auction_id(self, event_ids: pa.Array, kind: str) -> pa.Array:
        """lastBase0AuctionId for events of ``kind``: the newest auction so far."""
        epoch, offset = div(event_ids, self.total), mod(event_ids, self.total)
        if kind == "auction":
            return pc.add(pc.multiply(epoch, scalar(self.auction)), pc.subtract(offset, scalar(self.person)))
        return pc.add(pc.multiply(epoch, scalar(self.auction)), scalar(self.auction - 1))


def random_active_person(draws: Draws, word: int, last_person: pa.Array) -> pa.Array:
    """nextBase0PersonId: uniform over the last 1000 persons plus a lead of 10."""
    people = pc.add(last_person, scalar(1))
    active = pc.min_element_wise(people, scalar(NUM_ACTIVE_PEOPLE))
    return pc.add(pc.subtract(people, active), draws.uniform(word, pc.add(active, scalar(PERSON_ID_LEAD))))


def random_in_flight_auction(draws: Draws, word: int, last_auction: pa.Array) -> pa.Array:
    """nextBase0AuctionId: uniform over [last - 100, last + 10]."""
    low = pc.max_element_wise(pc.subtract(last_auction, scalar(NUM_IN_FLIGHT_AUCTIONS)), scalar(0))
    span = pc.add(pc.subtract(last_auction, low), scalar(1 + AUCTION_ID_LEAD))
    return pc.add(low, draws.uniform(word, span))


def hot_or(draws: Draws, word: int, ratio: int, hot: pa.Array, other: pa.Array) -> pa.Array:
    """``hot`` with probability 1 - 1/ratio (Java: random.nextInt(ratio) > 0), else ``other``."""
    return pc.if_else(pc.greater(draws.uniform(word, ratio), scalar(0)), hot, other)


def price(draws: Draws, word: int) -> pa.Array:
    """round(100 * 10^(6u)): log-uniform over [100, 10^8] cents."""
    return java_round(pc.multiply(pc.power(scalar(10.0), pc.multiply(draws.unit(word), scalar(6.0))), scalar(100.0)))


def extra_lengths(draws: Draws, word: int, current_size, average: int) -> pa.Array:
    """nextExtra's length: about ``average - current_size``, +-20%."""
    desired = pc.max_element_wise(pc.subtract(_arrow(average), _arrow(current_size)), scalar(0))
    delta = java_round(pc.multiply(pc.cast(desired, pa.float64()), scalar(0.2)))
    low = pc.subtract(desired, delta)
    spread = pc.max_element_wise(pc.multiply(delta, scalar(2)), scalar(1))
    return pc.if_else(pc.equal(delta, scalar(0)), low, pc.add(low, draws.uniform(word, spread)))


class StringPools:
    """Strings drawn once per seed, then picked per event by index (a vectorised take). Each
    pool has a generator of its own (``_random_for``), so which columns a table declares or a
    job reads (``NexmarkSource.project``) never changes another column's strings.

    ``next_string(max_length)`` pools follow StringsGenerator.nextString
    (3..max-1 characters, a space with probability 1/13, trimmed); the extra
    pool holds ``EXTRA_VARIANTS`` random lowercase strings of every length up
    to the table's maximum, so that ``extra`` has exactly the suite's length.
    """

    POOL_SIZE = 8192
    EXTRA_VARIANTS = 8

    def __init__(self, seed: int):
        self._seed = splitmix64_int(seed ^ 0x6E65786D61726B)
        self._pools: dict[object, pa.Array] = {}

    def _random_for(self, key: tuple) -> random.Random:
        """The generator of one pool: seeded by the seed and the pool alone, so a pool holds the
        same strings whichever pools were made before it (whichever columns a job reads)."""
        return random.Random(splitmix64_int(self._seed ^ zlib.crc32(repr(key).encode())))

    @staticmethod
    def _letters(rng: random.Random, count: int, spaces: bool) -> bytes:
        alphabet = "abcdefghijklmnopqrstuvwxyz"
        table = bytes((ord(" ") if spaces and b < 20 else ord(alphabet[b % 26])) for b in range(256))
        return rng.randbytes(count).translate(table)

    def next_string(self, max_length: int) -> pa.Array:
        key = ("string", max_length)
        if key not in self._pools:
            rng = self._random_for(key)
            lengths = [3 + rng.randrange(max_length - 3) for _ in range(self.POOL_SIZE)]
            text = self._letters(rng, sum(lengths), spaces=True).decode()
            strings, start = [], 0
            for length in lengths:
                strings.append(text[start : start + length].strip())
                start += length
            self._pools[key] = pa.array(strings, pa.string())
        return self._pools[key]

    def emails(self) -> pa.Array:
        if "email" not in self._pools:
            local, domain = self.next_string(7), self.next_string(5)
            rng = self._random_for(("email",))
            picks = [rng.randrange(self.POOL_SIZE) for _ in range(2 * self.POOL_SIZE)]
            users = local.take(pa.array(picks[: self.POOL_SIZE], pa.int64()))
            hosts = domain.take(pa.array(picks[self.POOL_SIZE :], pa.int64()))
            self._pools["email"] = pc.binary_join_element_wise(users, scalar("@"), hosts, scalar(".com"), scalar(""))
        return self._pools["email"]

    def extra(self, max_length: int) -> pa.Array:
        """Entry ``length * EXTRA_VARIANTS + v`` has ``length`` characters."""
        key = ("extra", max_length)
        if key not in self._pools:
            n = self.EXTRA_VARIANTS
            total = n * max_length * (max_length + 1) // 2
            data = self._letters(self._random_for(key), total, spaces=False)
            offsets, position = [0], 0
            for length in range(max_length + 1):
                for _ in range(n):
                    position += length
                    offsets.append(position)
            self._pools[key] = pa.StringArray.from_buffers(
                len(offsets) - 1, pa.array(offsets, pa.int32()).buffers()[1], pa.py_buffer(data)
            )
        return self._pools[key]

    def channels(self) -> tuple[pa.Array, pa.Array]:
        """(channel, url) for channel numbers 0..9999, then the 4 hot channels."""
        if "channel" not in self._pools:
            names = [f"channel-{n}" for n in range(CHANNELS_NUMBER)] + list(HOT_CHANNELS)
            urls = []
            rng = self._random_for(("channel",))
            for n in range(CHANNELS_NUMBER + len(HOT_CHANNELS)):
                url = self._base_url(rng)
                if n < CHANNELS_NUMBER and rng.randrange(10) > 0:
                    url += f"&channel_id={abs(_java_reverse_int(n))}"
                urls.append(url)
            self._pools["channel"] = pa.array(names, pa.string())
            self._pools["url"] = pa.array(urls, pa.string())
        return self._pools["channel"], self._pools["url"]

    @staticmethod
    def _base_url(rng: random.Random) -> str:
        def part() -> str:
            length = 3 + rng.randrange(2)
            return "".join("_" if rng.randrange(13) == 0 else chr(97 + rng.randrange(26))
                           for _ in range(length))

        return f"https://www.nexmark.com/{part()}/{part()}/{part()}/item.htm?query=1"


def _java_reverse_int(n: int) -> int:
    """Integer.reverse: the 32 bits in reverse order, as a signed int."""
    reversed_bits = int(f"{n & 0xFFFFFFFF:032b}"[::-1], 2)
    return reversed_bits - (1 << 32) if reversed_bits >= 1 << 31 else reversed_bits


def person_names() -> pa.Array:
    """The 99 'First Last' names; index first * 9 + last."""
    return pa.array([f"{f} {l}" for f in FIRST_NAMES for l in LAST_NAMES], pa.string())

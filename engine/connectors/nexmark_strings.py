"""The Nexmark generator's strings: pools drawn once per seed, and picks from them.

A string column of a batch is one pick per row from a pool, by index. A pick
gathers the pool's 16-byte string views with numpy and has Arrow copy the
picked strings once into a string array of exactly their size
(``Strings.pick``), which cost less in a job than Arrow's ``take`` of the
string array, under jemalloc, the allocator weir sets (the weir package's
``__init__``): Nexmark q0 at 10M events, 1.8 s of engine time against 2.1 s.
"""
from __future__ import annotations

import random
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.connectors.nexmark_model import CHANNELS_NUMBER, FIRST_NAMES, HOT_CHANNELS, LAST_NAMES
from weir.engine.pandas_import import scalar
from weir.engine.state.key_groups import splitmix64_int

#: The 99 'First Last' names; index first * 9 + last.
PERSON_NAMES = tuple(f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES)


class Strings:
    """A pool of strings (an Arrow string array without nulls) to pick from by index."""

    def __init__(self, strings: pa.Array):
        self.strings = strings
        views = strings.cast(pa.string_view())
        every_view = np.frombuffer(views.buffers()[1], np.uint64).reshape(-1, 2)
        #: One view per string: 16 bytes, its length and its bytes or where they are in ``_data``.
        self._views = every_view[views.offset : views.offset + len(views)]
        self._data = views.buffers()[2:]

    def __len__(self) -> int:
        return len(self.strings)

    def pick(self, index: np.ndarray) -> pa.Array:
        """The strings number ``index`` (int64, each in [0, len)), as a string array."""
        views = pa.py_buffer(np.take(self._views, index, axis=0))
        return pa.Array.from_buffers(pa.string_view(), len(index), [None, views, *self._data]).cast(pa.string())


class StringPools:
    """Strings drawn once per seed, then picked per event by index (``Strings.pick``). Each
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
        self._pools: dict[object, Strings] = {}

    def _random_for(self, key: tuple) -> random.Random:
        """The generator of one pool: seeded by the seed and the pool alone, so a pool holds the
        same strings whichever pools were made before it (whichever columns a job reads)."""
        return random.Random(splitmix64_int(self._seed ^ zlib.crc32(repr(key).encode())))

    @staticmethod
    def _letters(rng: random.Random, count: int, spaces: bool) -> bytes:
        alphabet = "abcdefghijklmnopqrstuvwxyz"
        table = bytes((ord(" ") if spaces and b < 20 else ord(alphabet[b % 26])) for b in range(256))
        return rng.randbytes(count).translate(table)

    def listed(self, values: tuple[str, ...]) -> Strings:
        """A fixed list of strings (US_STATES, PERSON_NAMES, ...), in its order."""
        if values not in self._pools:
            self._pools[values] = Strings(pa.array(values, pa.string()))
        return self._pools[values]

    def next_string(self, max_length: int) -> Strings:
        key = ("string", max_length)
        if key not in self._pools:
            rng = self._random_for(key)
            lengths = [3 + rng.randrange(max_length - 3) for _ in range(self.POOL_SIZE)]
            text = self._letters(rng, sum(lengths), spaces=True).decode()
            strings, start = [], 0
            for length in lengths:
                strings.append(text[start : start + length].strip())
                start += length
            self._pools[key] = Strings(pa.array(strings, pa.string()))
        return self._pools[key]

    def emails(self) -> Strings:
        if "email" not in self._pools:
            local, domain = self.next_string(7), self.next_string(5)
            rng = self._random_for(("email",))
            picks = [rng.randrange(self.POOL_SIZE) for _ in range(2 * self.POOL_SIZE)]
            users = local.strings.take(pa.array(picks[: self.POOL_SIZE], pa.int64()))
            hosts = domain.strings.take(pa.array(picks[self.POOL_SIZE :], pa.int64()))
            self._pools["email"] = Strings(
                pc.binary_join_element_wise(users, scalar("@"), hosts, scalar(".com"), scalar("")))
        return self._pools["email"]

    def extra(self, max_length: int) -> Strings:
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
            self._pools[key] = Strings(pa.StringArray.from_buffers(
                len(offsets) - 1, pa.array(offsets, pa.int32()).buffers()[1], pa.py_buffer(data)
            ))
        return self._pools[key]

    def channels(self) -> tuple[Strings, Strings]:
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
            self._pools["channel"] = Strings(pa.array(names, pa.string()))
            self._pools["url"] = Strings(pa.array(urls, pa.string()))
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



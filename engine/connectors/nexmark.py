"""The ``nexmark`` source: the Nexmark auction benchmark's persons, auctions and bids.

Events are numbered 0, 1, 2, ... across the whole stream; the event id
decides the kind (``id % 50``: 1 person, 3 auctions, 46 bids by default) and
every field (see ``nexmark_model``). With 'splits' = n, split i generates the
event ids i, i+n, i+2n, ... on its own timeline: its k-th event happens at
``base-time + k * n * 1e6 / first-event.rate`` µs (stored in whole milliseconds,
as TIMESTAMP(3)), so 'first-event.rate' is
the total number of events per event-time second of all splits together.

A table reads one kind ('table' = 'bid' | 'auction' | 'person'): the rows
of that kind only, with their ids and timestamps as in the interleaved
stream. A split's offset is the next event id it will consider; reading
from an offset yields exactly the rows a full read yields after it.

'rate' (weir's option) holds the source to that many events per second of
wall clock, all kinds and all splits together (each split ``rate / splits``),
sleeping between batches of a tenth of a second's rows
(``engine.connectors.pacing``): an unbounded demo then uses a fraction of a
core. It changes when rows are made, never which: event time comes from
'first-event.rate', and the rows are those of an unpaced run.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Source, option_value
from weir.engine.connectors.nexmark_model import (
    AVG_BYTES, CHANNELS_NUMBER, FIRST_AUCTION_ID, FIRST_CATEGORY_ID, FIRST_PERSON_ID, HOT_BLOCK,
    HOT_CHANNELS, NUM_CATEGORIES, NUM_IN_FLIGHT_AUCTIONS, US_CITIES, US_STATES, Draws, Proportions, extra_lengths,
    hot_or, price, random_active_person, random_in_flight_auction,
)
from weir.engine.connectors.nexmark_strings import PERSON_NAMES, StringPools, Strings
from weir.engine.connectors.options import parse_int, parse_timestamp_us
from weir.engine.connectors.pacing import Pacer, paced_batch_size
from weir.engine.errors import ConnectorOptionError
from weir.engine.pandas_import import arrow_array, numpy_values, scalar

_TS = pa.timestamp("us")
_INT64_MAX = np.iinfo(np.int64).max
COLUMNS: dict[str, dict[str, pa.DataType]] = {
    "bid": {"auction": pa.int64(), "bidder": pa.int64(), "price": pa.int64(), "channel": pa.string(),
            "url": pa.string(), "date_time": _TS, "extra": pa.string()},
    "auction": {"id": pa.int64(), "item_name": pa.string(), "description": pa.string(),
                "initial_bid": pa.int64(), "reserve": pa.int64(), "date_time": _TS, "expires": _TS,
                "seller": pa.int64(), "category": pa.int64(), "extra": pa.string()},
    "person": {"id": pa.int64(), "name": pa.string(), "email_address": pa.string(),
               "credit_card": pa.string(), "city": pa.string(), "state": pa.string(),
               "date_time": _TS, "extra": pa.string()},
}


@dataclass(frozen=True)
class Events:
    """The events of a batch's rows: each one's index ``k`` within the split, its event id, and
    the block of ``total`` events it is in (``epoch``) and its place there (``offset``): int64."""

    k: np.ndarray
    event_ids: np.ndarray
    epoch: np.ndarray
    offset: np.ndarray

    def slice(self, start: int, count: int) -> Events:
        end = start + count
        return Events(self.k[start:end], self.event_ids[start:end], self.epoch[start:end], self.offset[start:end])


class SplitTimeline:
    """Which event ids split ``split`` of ``splits`` generates for one kind, row by row.

    The k-th event of the split has id ``split + k * splits``; whether it is
    of the kind repeats with period ``total / gcd(splits, total)`` in k, so
    row j of the kind is at k = (j // R) * period + residues[j % R].

    Row j + R is then ``period`` events later in the split and ``period * splits``
    later in the stream, a whole number of blocks (``lcm(splits, total)``): its
    event is row j's shifted, in the same place of its block. So a batch's
    events are those of the rows from 0 (made once), sliced and shifted.
    """

    def __init__(self, split: int, splits: int, proportions: Proportions, kind: str):
        low, high = proportions.kind_range(kind)
        total = proportions.total
        self.split, self.splits = split, splits
        self.period = total // gcd(splits, total)
        self.residues = [r for r in range(self.period) if low <= (split + r * splits) % total < high]
        self._residues = np.array(self.residues, np.int64)
        self._proportions = proportions
        self._from_zero: Events | None = None  # rows 0, 1, ...: as many as a batch has needed

    def _events_from_zero(self, count: int) -> Events:
        rows = np.arange(count, dtype=np.int64)
        k = rows // len(self.residues) * self.period + self._residues[rows % len(self.residues)]
        event_ids = k * self.splits + self.split
        epoch = event_ids // self._proportions.total
        events = Events(k, event_ids, epoch, event_ids - epoch * self._proportions.total)
        for values in (events.k, events.event_ids, events.epoch, events.offset):
            values.flags.writeable = False  # batches share them (their offsets are slices of them)
        return events

    def row_at_or_after(self, k: int) -> int:
        """The first row whose event is the k-th of the split or later."""
        whole, rest = divmod(k, self.period)
        return whole * len(self.residues) + sum(1 for r in self.residues if r < rest)

    def events(self, first_row: int, count: int) -> Events:
        """The events of rows ``first_row`` ... ``first_row + count - 1``."""
        cycles, rest = divmod(first_row, len(self.residues))
        if self._from_zero is None or len(self._from_zero.k) < rest + count:
            self._from_zero = self._events_from_zero(rest + count)
        events = self._from_zero.slice(rest, count)
        shift = cycles * self.period * self.splits  # in event ids, whole blocks
        return Events(events.k + cycles * self.period, events.event_ids + shift,
                      events.epoch + shift // self._proportions.total, events.offset)


class NexmarkSource(Source):
    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)

        def number(key: str, minimum: int = 1) -> int:
            return parse_int(key, option_value(options, SPEC, key), minimum=minimum)

        self.table = option_value(options, SPEC, "table")
        self.proportions = Proportions(
            number("person.proportion"), number("auction.proportion"), number("bid.proportion")
        )
        events = options.get("events", options.get("events.num"))
        self.events = None if events is None else parse_int("events", events, minimum=0)
        self.rate = number("first-event.rate")
        paced = options.get("rate")
        #: Events per second of wall clock, or None (as fast as the job reads).
        self.wall_rate = None if paced is None else parse_int("rate", paced, minimum=1)
        self.seed = number("seed", minimum=0)
        self.base_us = parse_timestamp_us("base-time", option_value(options, SPEC, "base-time"))
        self.split_count = number("splits")
        self.hot_auctions = number("bid.hot-ratio.auctions")
        self.hot_bidders = number("bid.hot-ratio.bidders")
        self.hot_sellers = number("auction.hot-ratio.sellers")
        self.bidder_shift = number("bid.bidder-id-shift", minimum=0)
        self._check_schema()
        self._pools = StringPools(self.seed)

    def _check_schema(self) -> None:
        valid = COLUMNS[self.table]
        unknown = [name for name in self.schema.names if name not in valid]
        if unknown:
            raise ConnectorOptionError(
                f"the nexmark table '{self.table}' has no column '{unknown[0]}'; "
                f"its columns are {', '.join(valid)}",
                hint="declare a subset of these columns, by name",
            )

    @property
    def bounded(self) -> bool:
        return self.events is not None

    def project(self, columns: list[str]) -> None:
        """Generate only ``columns``: every field is drawn from the event id alone, so the others
        are simply not made (a column another one is derived from is made for it)."""
        self.schema = pa.schema([f for f in self.schema if f.name in columns], metadata=self.schema.metadata)

    def splits(self) -> list[str]:
        return [str(i) for i in range(self.split_count)]

    def read(self, split: str, offset: Any = None) -> Iterator[tuple[pa.RecordBatch, Any]]:
        """Batches of ``split`` from event id ``offset`` on; offset = next event id."""
        index = int(split)
        n = self.split_count
        timeline = SplitTimeline(index, n, self.proportions, self.table)
        if not timeline.residues:
            return  # with these splits and proportions this split never has an event of this kind
        first_k = 0 if offset is None else max(0, -(-(int(offset) - index) // n))
        row = timeline.row_at_or_after(first_k)
        end_row = None
        if self.events is not None:
            events_in_split = max(0, -(-(self.events - index) // n))
            end_row = timeline.row_at_or_after(events_in_split)
        split_rate = None if self.wall_rate is None else self.wall_rate / n
        share = len(timeline.residues) / timeline.period  # of the split's events, those of this kind
        size = paced_batch_size(self.batch_size, None if split_rate is None else split_rate * share)
        pacer = Pacer(split_rate)
        while end_row is None or row < end_row:
            count = size if end_row is None else min(size, end_row - row)
            events = timeline.events(row, count)
            batch = self.generate(events)
            row += count
            pacer.wait(int(events.k[0]))
            yield batch, int(events.event_ids[-1]) + n

    def generate(self, events: Events) -> pa.RecordBatch:
        """The declared columns for ``events``."""
        columns = _Columns(self, events)
        arrays = [columns.get(f.name) for f in self.schema]
        return pa.RecordBatch.from_arrays(
            [a if a.type == f.type else pc.cast(a, f.type) for a, f in zip(arrays, self.schema)], schema=self.schema
        )

    def timestamp_us(self, k: np.ndarray) -> np.ndarray:
        """base + k * n * 1e6 / rate, in whole µs (integer arithmetic; k >= 0)."""
        factor = self.split_count * 1_000_000
        if len(k) and int(k.max()) > _INT64_MAX // factor:
            raise pa.ArrowInvalid("overflow")  # what Arrow's checked multiply raised here before
        return k * factor // self.rate + self.base_us


def milliseconds(us: np.ndarray) -> pa.Array:
    """µs since the epoch as a TIMESTAMP(3) value: whole milliseconds (floored, as Arrow's
    floor_temporal), as Nexmark's generator makes them (its tables declare TIMESTAMP(3);
    sub-millisecond digits would show in CAST(date_time AS STRING) and MAX(date_time))."""
    return arrow_array(us // 1000 * 1000).view(_TS)


class _Columns:
    """The columns of one batch, each computed on first use from shared parts.

    The builders are closures over the ``_Columns``; it does not keep them
    (``get`` makes them anew), so it holds no reference cycle and its arrays are
    freed with the batch, not at the next run of the cyclic collector: until then
    each batch's arrays took fresh memory, paged in anew (q1's columns at 10M events:
    140K page faults and 0.3 s of CPU more; Arrow held up to 200 MB).
    """

    def __init__(self, source: NexmarkSource, events: Events):
        self.source = source
        self.kind = source.table
        self.events = events
        self.k = events.k
        self.draws = Draws(events.event_ids, source.seed)
        self._cache: dict[str, pa.Array] = {}
        self._channel_index: np.ndarray | None = None
        self._kind_columns: Callable[[_Columns], dict[str, Callable[[], pa.Array]]] = getattr(
            _Columns, f"_{self.kind}_columns")

    def get(self, name: str) -> pa.Array:
        if name not in self._cache:
            self._cache[name] = self._kind_columns(self)[name]()
        return self._cache[name]

    def _date_time(self) -> pa.Array:
        return milliseconds(self.source.timestamp_us(self.k))

    def _last_person(self) -> np.ndarray:
        return self.source.proportions.last_person_id(self.events.epoch, self.events.offset, self.kind)

    def _last_auction(self) -> np.ndarray:
        return self.source.proportions.last_auction_id(self.events.epoch, self.events.offset, self.kind)

    def _extra(self, word: int, current_size: int | np.ndarray, variant_word: int) -> pa.Array:
        average = AVG_BYTES[self.kind]
        pool = self._pools.extra(average + average // 5 + 1)
        index = extra_lengths(self.draws, word, current_size, average)  # a new array: the steps run in place
        index *= StringPools.EXTRA_VARIANTS
        index += self.draws.uniform(variant_word, StringPools.EXTRA_VARIANTS)
        return pool.pick(index)

    def _pick(self, strings: Strings, word: int) -> pa.Array:
        """One of ``strings`` per row, uniformly."""
        return strings.pick(self.draws.uniform(word, len(strings)))

    def _lengths(self, *columns: str) -> np.ndarray:
        """The characters of the strings of ``columns`` together, row by row."""
        return sum(numpy_values(pc.utf8_length(self.get(c))).astype(np.int64) for c in columns)

    @property
    def _pools(self) -> StringPools:
        return self.source._pools

    # Draw words per kind: each field has its own, so fields are independent.
    def _bid_columns(self) -> dict[str, Callable[[], pa.Array]]:
        s, d = self.source, self.draws

        def auction() -> pa.Array:
            last = self._last_auction()
            hot = last // HOT_BLOCK * HOT_BLOCK
            chosen = hot_or(d, 0, s.hot_auctions, hot, random_in_flight_auction(d, 1, last))
            return arrow_array(chosen + FIRST_AUCTION_ID)

        def bidder() -> pa.Array:
            last = self._last_person()
            hot = last // HOT_BLOCK * HOT_BLOCK + 1
            chosen = hot_or(d, 2, s.hot_bidders, hot, random_active_person(d, 3, last))
            return arrow_array(chosen + (FIRST_PERSON_ID + s.bidder_shift))

        def channel_index() -> np.ndarray:
            if self._channel_index is None:
                hot = d.uniform(6, len(HOT_CHANNELS)) + CHANNELS_NUMBER
                self._channel_index = hot_or(d, 5, 2, hot, d.uniform(6, CHANNELS_NUMBER))
            return self._channel_index

        return {
            "auction": auction,
            "bidder": bidder,
            "price": lambda: arrow_array(price(d, 4)),
            "channel": lambda: self._pools.channels()[0].pick(channel_index()),
            "url": lambda: self._pools.channels()[1].pick(channel_index()),
            "date_time": self._date_time,
            "extra": lambda: self._extra(7, 8 + 8 + 8 + 8, 8),
        }

    def _auction_columns(self) -> dict[str, Callable[[], pa.Array]]:
        s, d = self.source, self.draws

        def seller() -> pa.Array:
            last = self._last_person()
            hot = last // HOT_BLOCK * HOT_BLOCK
            chosen = hot_or(d, 0, s.hot_sellers, hot, random_active_person(d, 1, last))
            return arrow_array(chosen + FIRST_PERSON_ID)

        def expires() -> pa.Array:
            # Auctions last 1 ms + uniform[0, 2H): H is the event time in which
            # NUM_IN_FLIGHT_AUCTIONS more auctions are generated on this split.
            ahead = NUM_IN_FLIGHT_AUCTIONS * s.proportions.total // s.proportions.auction
            now = s.timestamp_us(self.k)
            horizon = s.timestamp_us(self.k + ahead) - now
            length = d.uniform(5, np.maximum(horizon * 2, 1)) + 1000
            return milliseconds(now + length)

        return {
            "id": lambda: arrow_array(self._last_auction() + FIRST_AUCTION_ID),
            "item_name": lambda: self._pick(self._pools.next_string(20), 6),
            "description": lambda: self._pick(self._pools.next_string(100), 7),
            "initial_bid": lambda: arrow_array(price(d, 3)),
            "reserve": lambda: arrow_array(numpy_values(self.get("initial_bid")) + price(d, 4)),
            "date_time": self._date_time,
            "expires": expires,
            "seller": seller,
            "category": lambda: arrow_array(d.uniform(2, NUM_CATEGORIES) + FIRST_CATEGORY_ID),
            "extra": lambda: self._extra(8, self._lengths("item_name", "description") + (8 + 8 * 5), 9),
        }

    def _person_columns(self) -> dict[str, Callable[[], pa.Array]]:
        d = self.draws

        def credit_card() -> pa.Array:
            groups = [pc.utf8_lpad(arrow_array(d.uniform(w, 10_000)).cast(pa.string()), 4, "0") for w in (2, 3, 4, 5)]
            return pc.binary_join_element_wise(*groups, scalar(" "))

        return {
            "id": lambda: arrow_array(self._last_person() + FIRST_PERSON_ID),
            "name": lambda: self._pick(self._pools.listed(PERSON_NAMES), 0),
            "email_address": lambda: self._pick(self._pools.emails(), 1),
            "credit_card": credit_card,
            "city": lambda: self._pick(self._pools.listed(US_CITIES), 6),
            "state": lambda: self._pick(self._pools.listed(US_STATES), 7),
            "date_time": self._date_time,
            "extra": lambda: self._extra(
                8, self._lengths("name", "email_address", "credit_card", "city", "state") + 8, 9),
        }


def _option(description: str, default: str | None, value_type: str = "positive-int", **kw: Any) -> OptionSpec:
    return OptionSpec(description, default=default, value_type=value_type, **kw)


SPEC = ConnectorSpec(
    name="nexmark",
    source=NexmarkSource,
    sink=None,
    options={
        "table": _option("which events the table holds", "bid", "string", choices=("bid", "auction", "person")),
        "events": _option("total events of all kinds (missing: unbounded)", None, "int"),
        "events.num": _option("Flink's name for 'events'", None, "int"),
        "first-event.rate": _option("events per event-time second, all splits together", "10000000"),
        "rate": _option("weir: events per second of wall clock, all splits together (missing: as fast as "
                        "the job reads); changes when events are made, never which", None),
        "seed": _option("the seed every random draw derives from", "0", "int"),
        "base-time": _option("event time of event 0", "2024-01-01 00:00:00", "timestamp"),
        "splits": _option("number of generators (source splits)", "1"),
        "person.proportion": _option("persons per block of events", "1"),
        "auction.proportion": _option("auctions per block of events", "3"),
        "bid.proportion": _option("bids per block of events", "46"),
        "bid.hot-ratio.auctions": _option("a bid is for the hot auction with probability 1 - 1/this", "2"),
        "bid.hot-ratio.bidders": _option("a bid is by the hot bidder with probability 1 - 1/this", "4"),
        "auction.hot-ratio.sellers": _option("an auction is by the hot seller with probability 1 - 1/this", "4"),
        "bid.bidder-id-shift": _option(
            "added to bidder ids on top of the first person id; the Flink suite adds 1000 "
            "(FIRST_PERSON_ID twice), '0' gives Beam's ids, which join to person.id",
            "1000", "int",
        ),
    },
)

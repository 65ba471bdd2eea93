"""The ``datagen`` connector: rows generated at a rate, with Flink's options.

Options (Flink's names): 'rows-per-second' (default 10000, of wall clock),
'number-of-rows' (the source is bounded when set), and per column
``fields.<column>.<property>``:

- ``kind``: 'random' (default) or 'sequence';
- random: ``min`` / ``max`` (numbers; default the type's range; for DECIMAL
  its precision's), ``length`` (strings: that many hex digits, as Flink;
  default 100), ``max-past`` (TIMESTAMP / DATE: how far before "now" a value
  may be, a duration; default 0);
- sequence: ``start`` and ``end`` (both required, as in Flink): row i has
  ``start + i``; the source ends when a sequence is exhausted (with
  'number-of-rows', whichever ends first);
- ``null-rate``: the share of NULLs (default 0).

Types: TINYINT..BIGINT, FLOAT, DOUBLE, DECIMAL, BOOLEAN, STRING/VARCHAR
(random or a sequence of numbers as text), TIMESTAMP and DATE (random only).

Determinism (where weir differs from Flink, whose random fields differ on
every run): every value is a function of (seed, column, row index), from
SplitMix64 over the row indices, so a batch can be generated for any range of
rows with the same result. The seed is weir's option 'seed' (default 0). The
source is one split whose offset is the number of rows emitted: a restored
job generates the very rows it would have. Random TIMESTAMPs are ``now -
uniform(0, max-past)``, with "now" the wall clock when the batch is made, as
in Flink — unless 'seed' is set: then row i's "now" is
``2024-01-01 00:00:00 + i / rows-per-second`` (the event time the rows would
have had arriving exactly at the rate), so that output is reproducible.

Generation is vectorised (numpy); pacing to 'rows-per-second' sleeps
(``engine.connectors.pacing``), with batches of a tenth of a second's rows.
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Source, option_value
from weir.engine.connectors.options import parse_duration, parse_int, parse_timestamp_us
from weir.engine.connectors.pacing import Pacer, paced_batch_size
from weir.engine.connectors.timestamps import declared_precision, truncate
from weir.engine.errors import ConnectorOptionError
from weir.engine.state.key_groups import splitmix64_int, splitmix64_numpy

FIELDS = "fields."
KINDS = ("random", "sequence")
PROPERTIES = ("kind", "min", "max", "max-past", "length", "start", "end", "null-rate")
#: Row 0's "now" when 'seed' is set (as the nexmark source's 'base-time').
DETERMINISTIC_EPOCH = "2024-01-01 00:00:00"
DEFAULT_STRING_LENGTH = 100
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_US_PER_DAY = 86_400_000_000
#: Draw words of a row, per column: which purpose uses which.
_VALUE, _NULL, _STRING = 0, 1, 2


@dataclass
class _Rows:
    """The rows of one batch: their indices and the "now" of each (µs)."""

    index: np.ndarray  # int64
    now_us: np.ndarray  # int64


class _Field:
    """How one column is generated, from its ``fields.<column>.*`` options."""

    def __init__(self, field: pa.Field, props: dict[str, str], seed: int):
        self.field, self.type, self.props = field, field.type, props
        self.name = field.name
        self.kind = props.get("kind", "random")
        if self.kind not in KINDS:
            self._fail("kind", f"must be 'random' or 'sequence', not '{self.kind}'", "'random'")
        self.salt = np.uint64(splitmix64_int((seed * 0x100000001B3) ^ zlib.crc32(self.name.encode())))
        self.null_rate = self._fraction("null-rate")
        self.length: int | None = None
        self.start = self.end = None
        self.low = self.high = None
        self.max_past_us = 0
        self._build()

    # -- options ------------------------------------------------------------
    def _key(self, prop: str) -> str:
        return f"{FIELDS}{self.name}.{prop}"

    def _fail(self, prop: str, problem: str, example: str) -> None:
        raise ConnectorOptionError(f"datagen option '{self._key(prop)}' {problem}",
                                   hint=f"write for example '{self._key(prop)}' = {example}")

    def _refuse(self, *props: str, why: str) -> None:
        for prop in props:
            if prop in self.props:
                raise ConnectorOptionError(f"datagen option '{self._key(prop)}' does not apply: {why}",
                                           hint=f"remove '{self._key(prop)}'")

    def _number(self, prop: str, default=None, *, integer: bool):
        text = self.props.get(prop)
        if text is None:
            return default
        try:
            return int(text.strip()) if integer else Decimal(text.strip())
        except (ValueError, InvalidOperation):
            self._fail(prop, f"must be {'an integer' if integer else 'a number'}, not '{text}'", "'10'")

    def _fraction(self, prop: str) -> float:
        text = self.props.get(prop, "0")
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0.0 <= value <= 1.0:
            self._fail(prop, f"must be a fraction between 0 and 1, not '{text}'", "'0.1'")
        return value

    def _build(self) -> None:
        t = self.type
        integer = pa.types.is_integer(t)
        numeric = integer or pa.types.is_floating(t) or pa.types.is_decimal(t)
        temporal = pa.types.is_timestamp(t) or pa.types.is_date(t)
        if not (numeric or temporal or pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise ConnectorOptionError(f"datagen cannot generate column '{self.name}' of type {t}",
                                       hint="declare it as a number, BOOLEAN, STRING, TIMESTAMP or DATE, "
                                            "or compute it from generated columns")
        if self.kind == "sequence":
            if not (numeric or pa.types.is_string(t)):
                self._fail("kind", f"'sequence' needs a number or STRING column; '{self.name}' is {t}", "'random'")
            self._refuse("min", "max", "length", "max-past", why="a sequence has 'start' and 'end'")
            for prop in ("start", "end"):
                if prop not in self.props:
                    self._fail(prop, "is missing: a sequence needs 'start' and 'end'", "'1'")
            self.start, self.end = self._number("start", integer=True), self._number("end", integer=True)
            if self.start > self.end:
                self._fail("start", f"({self.start}) is above '{self._key('end')}' ({self.end})", f"'{self.end}'")
            if integer:
                info = np.iinfo(t.to_pandas_dtype())
                if self.start < info.min or self.end > info.max:
                    self._fail("end", f"leaves the range of {t} ({info.min}..{info.max})", f"'{info.max}'")
            return
        self._refuse("start", "end", why="only a 'sequence' has them (set 'kind' = 'sequence')")
        if not numeric:
            self._refuse("min", "max", why=f"column '{self.name}' is not a number")
        if not pa.types.is_string(t):
            self._refuse("length", why=f"column '{self.name}' is not a string")
        if not temporal:
            self._refuse("max-past", why=f"column '{self.name}' is not a TIMESTAMP or DATE")
        if numeric:
            low, high = self._type_range()
            self.low = self._number("min", low, integer=integer)
            self.high = self._number("max", high, integer=integer)
            if self.low > self.high:
                self._fail("min", f"({self.low}) is above '{self._key('max')}' ({self.high})", f"'{self.high}'")
            if integer and (self.low < low or self.high > high):
                prop = "max" if self.high > high else "min"
                self._fail(prop, f"leaves the range of {t} ({low}..{high})", f"'{high if prop == 'max' else low}'")
        if pa.types.is_string(t):
            self.length = self._number("length", DEFAULT_STRING_LENGTH, integer=True)
            if self.length < 0:
                self._fail("length", f"must be 0 or more, not {self.length}", "'10'")
        if temporal and "max-past" in self.props:
            self.max_past_us = parse_duration(self._key("max-past"), self.props["max-past"])

    def _type_range(self):
        t = self.type
        if pa.types.is_integer(t):
            info = np.iinfo(t.to_pandas_dtype())
            return int(info.min), int(info.max)
        if pa.types.is_decimal(t):
            top = Decimal(10) ** (t.precision - t.scale) - Decimal(10) ** -t.scale
            return -top, top
        info = np.finfo(np.float32 if t == pa.float32() else np.float64)
        return Decimal(float(info.min)), Decimal(float(info.max))

    @property
    def rows(self) -> int | None:
        """How many rows this column allows (a sequence's length), or None."""
        return None if self.kind != "sequence" else self.end - self.start + 1

    # -- generation -----------------------------------------------------------
    def _words(self, rows: _Rows, purpose: int) -> np.ndarray:
        base = splitmix64_numpy(rows.index.astype(np.uint64) ^ self.salt)
        return splitmix64_numpy(base + np.uint64((purpose * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF))

    def _units(self, rows: _Rows, purpose: int) -> np.ndarray:
        """Doubles uniform in [0, 1)."""
        return (self._words(rows, purpose) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))

    def generate(self, rows: _Rows) -> pa.Array:
        values = self._sequence(rows) if self.kind == "sequence" else self._random(rows)
        if self.null_rate > 0:
            nulls = self._units(rows, _NULL) < self.null_rate
            values = pc.if_else(pa.array(nulls), pa.nulls(len(values), values.type), values)
        precision = declared_precision(self.field)
        if precision is not None:
            values = truncate(values, precision)
        return values

    def _sequence(self, rows: _Rows) -> pa.Array:
        numbers = pa.array(rows.index + self.start, pa.int64())
        t = self.type
        if pa.types.is_string(t):
            return pc.cast(numbers, t)
        if pa.types.is_decimal(t):
            return pc.cast(pc.cast(numbers, pa.decimal128(38, t.scale)), t)
        return pc.cast(numbers, t)

    def _random(self, rows: _Rows) -> pa.Array:
        t = self.type
        if pa.types.is_integer(t):
            span = self.high - self.low + 1
            words = self._words(rows, _VALUE)
            offset = words if span >= 1 << 64 else words % np.uint64(span)
            values = (offset + np.uint64(self.low & 0xFFFFFFFFFFFFFFFF)).view(np.int64)
            return pa.array(values, pa.int64()).cast(t)
        if pa.types.is_floating(t) or pa.types.is_decimal(t):
            u = self._units(rows, _VALUE)
            low, high = float(self.low), float(self.high)
            values = low * (1.0 - u) + high * u
            if pa.types.is_floating(t):
                return pa.array(values.astype(np.float32 if t == pa.float32() else np.float64), t)
            rounded = np.clip(np.round(values, t.scale), low, high)
            return pc.cast(pa.array(rounded, pa.float64()), t)
        if pa.types.is_boolean(t):
            return pa.array((self._words(rows, _VALUE) & np.uint64(1)).astype(bool), pa.bool_())
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return self._hex(rows).cast(t)
        past = (self._units(rows, _VALUE) * (self.max_past_us + 1)).astype(np.int64)
        moments = rows.now_us - past
        if pa.types.is_date(t):
            return pa.array(np.floor_divide(moments, _US_PER_DAY).astype(np.int32), pa.date32()).cast(t)
        return pa.array(moments, pa.int64()).cast(pa.timestamp("us")).cast(t)

    def _hex(self, rows: _Rows) -> pa.Array:
        """``length`` hex digits per row, 16 from each 64-bit draw."""
        count, length = len(rows.index), self.length
        words = max(1, -(-length // 16))
        draws = np.stack([self._words(rows, _STRING + w) for w in range(words)], axis=1)  # (rows, words)
        shifts = np.arange(60, -4, -4, dtype=np.uint64)
        nibbles = ((draws[:, :, None] >> shifts) & np.uint64(15)).reshape(count, words * 16)[:, :length]
        data = _HEX[nibbles.astype(np.intp)].tobytes()
        offsets = np.arange(0, (count + 1) * length, length, dtype=np.int32)[: count + 1]
        return pa.StringArray.from_buffers(count, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))


class DataGenSource(Source):
    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        self.rows_per_second = parse_int("rows-per-second", option_value(options, SPEC, "rows-per-second"), minimum=1)
        rows = options.get("number-of-rows")
        self.number_of_rows = None if rows is None else parse_int("number-of-rows", rows, minimum=0)
        self.seeded = "seed" in options
        self.seed = parse_int("seed", options.get("seed", "0"), minimum=0)
        self.epoch_us = parse_timestamp_us("seed", DETERMINISTIC_EPOCH)
        self.fields = [_Field(f, props, self.seed) for f, props in zip(schema, self._field_options())]
        limits = [n for n in (self.number_of_rows, *(f.rows for f in self.fields)) if n is not None]
        #: Rows the source generates in all, or None (unbounded).
        self.total_rows = min(limits) if limits else None

    def _field_options(self) -> list[dict[str, str]]:
        by_column: dict[str, dict[str, str]] = {f.name: {} for f in self.schema}
        folded = {name.lower(): name for name in by_column}
        for key, value in self.options.items():
            if not key.startswith(FIELDS):
                continue
            column, _, prop = key[len(FIELDS):].rpartition(".")
            name = column if column in by_column else folded.get(column.lower())
            if name is None:
                raise ConnectorOptionError(
                    f"datagen option '{key}' names no column of the table: its columns are "
                    + ", ".join(by_column), hint=f"write 'fields.<column>.{prop or 'kind'}' with a declared column")
            if prop not in PROPERTIES:
                raise ConnectorOptionError(
                    f"datagen option '{key}' has no property '{prop}'",
                    hint="the properties of a field are " + ", ".join(f"'{p}'" for p in PROPERTIES))
            by_column[name][prop] = value
        return list(by_column.values())

    @property
    def bounded(self) -> bool:
        return self.total_rows is not None

    def splits(self) -> list[str]:
        return ["0"]

    def read(self, split: str, offset: Any = None) -> Iterator[tuple[pa.RecordBatch, Any]]:
        """Batches of rows ``offset``, ``offset + 1``, ...; the offset is the next row's index."""
        row = int(offset or 0)
        size = paced_batch_size(self.batch_size, self.rows_per_second)
        pacer = Pacer(self.rows_per_second)
        while self.total_rows is None or row < self.total_rows:
            count = size if self.total_rows is None else min(size, self.total_rows - row)
            pacer.wait(row)
            yield self.generate(row, count), row + count
            row += count

    def generate(self, first: int, count: int) -> pa.RecordBatch:
        """Rows ``first`` .. ``first + count - 1``: the same whatever batches they come in
        (timestamps aside, unless 'seed' is set: see the module docstring)."""
        index = np.arange(first, first + count, dtype=np.int64)
        if self.seeded:
            now = self.epoch_us + index * 1_000_000 // self.rows_per_second
        else:
            now = np.full(count, time.time_ns() // 1000, dtype=np.int64)
        rows = _Rows(index, now)
        return pa.RecordBatch.from_arrays([f.generate(rows) for f in self.fields], schema=self.schema)


SPEC = ConnectorSpec(
    name="datagen",
    source=DataGenSource,
    sink=None,
    options={
        "rows-per-second": OptionSpec("rows generated per second of wall clock", default="10000",
                                      value_type="positive-int"),
        "number-of-rows": OptionSpec("rows in all (missing: unbounded, unless a sequence ends)", value_type="int"),
        "seed": OptionSpec("weir: the seed of every random value; set, TIMESTAMPs follow the row index "
                           "instead of the wall clock", value_type="int"),
    },
    option_prefixes=(FIELDS,),
)

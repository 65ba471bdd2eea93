"""Interval literals, in microseconds (the engine's time unit).

``interval_micros`` reads SQL intervals: ``INTERVAL '10' SECOND``,
``INTERVAL '1.5' SECOND``, ``INTERVAL '1' SECOND(3)``, RisingWave's
``INTERVAL '10 seconds'``, spans like ``INTERVAL '0 00:01:00' DAY TO SECOND``.
Duration options ('30 s', '5min') are read by the engine's
``engine.connectors.options.parse_duration``, Flink's rules, for every layer.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from weir.sql.positions import error_at

MICROS = {
    "MICROSECOND": 1,
    "MILLISECOND": 1_000,
    "SECOND": 1_000_000,
    "MINUTE": 60_000_000,
    "HOUR": 3_600_000_000,
    "DAY": 86_400_000_000,
    "WEEK": 7 * 86_400_000_000,
}

#: Spellings of each unit in SQL intervals (lower case).
UNIT_NAMES = {
    "MICROSECOND": ("us", "µs", "micro", "micros", "microsecond", "microseconds"),
    "MILLISECOND": ("ms", "milli", "millis", "millisecond", "milliseconds", "msec", "msecs"),
    "SECOND": ("s", "sec", "secs", "second", "seconds"),
    "MINUTE": ("m", "min", "mins", "minute", "minutes"),
    "HOUR": ("h", "hr", "hrs", "hour", "hours"),
    "DAY": ("d", "day", "days"),
    "WEEK": ("w", "week", "weeks"),
}
UNITS = {name: unit for unit, names in UNIT_NAMES.items() for name in names}
CALENDAR_UNITS = {"MONTH", "MONTHS", "YEAR", "YEARS", "QUARTER", "QUARTERS", "MON", "MONS"}

#: The fields of a span like DAY TO SECOND, largest first.
SPAN_FIELDS = ("DAY", "HOUR", "MINUTE", "SECOND")

_AMOUNT_AND_UNIT = re.compile(r"\s*([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*([a-zµ]*)\s*", re.IGNORECASE)

INTERVAL_HINT = "write a fixed-length interval such as INTERVAL '10' SECOND, INTERVAL '1' MINUTE or INTERVAL '500' MILLISECOND"


def interval_micros(e: exp.Expr) -> int:
    """The length of an interval literal in microseconds."""
    if not isinstance(e, exp.Interval):
        raise error_at(e, f"expected an interval, got {e.sql()}", INTERVAL_HINT)
    text = e.this.name if isinstance(e.this, exp.Literal) else None
    if text is None:
        raise error_at(e, f"the interval {e.sql()} must be a literal", INTERVAL_HINT)
    unit = e.args.get("unit")
    try:
        if unit is None:
            return _amounts_micros(text)
        if isinstance(unit, exp.IntervalSpan):
            return _span_micros(text, unit.this.name.upper(), unit.expression.name.upper())
        return _micros(_decimal(text), _unit_name(unit))
    except ValueError as reason:
        raise error_at(e, f"cannot read the interval {e.sql()}: {reason}", INTERVAL_HINT) from None


def _unit_name(unit: exp.Expr) -> str:
    """SECOND for Var(SECOND), Var(SECONDS) and the precision form SECOND(3)."""
    name = unit.name if isinstance(unit, exp.Var) else unit.key
    name = name.upper()
    if name in CALENDAR_UNITS:
        raise ValueError(f"{name} has no fixed length")
    canonical = UNITS.get(name.lower())
    if canonical is None:
        raise ValueError(f"unknown unit {name}")
    return canonical


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"'{text}' is not a number") from None


def _micros(amount: Decimal, unit: str) -> int:
    micros = amount * MICROS[unit]
    if micros != micros.to_integral_value():
        raise ValueError("it is finer than a microsecond")
    return int(micros)


def _amounts_micros(text: str) -> int:
    """'10 seconds', '1 minute 30 seconds', '5s', '500 ms': amounts each with a unit."""
    total, position = 0, 0
    while position < len(text):
        match = _AMOUNT_AND_UNIT.match(text, position)
        if not match or not match.group(2) or match.end() == position:
            raise ValueError(f"expected a number and a unit at '{text[position:]}'")
        unit = match.group(2).lower()
        if unit.upper() in CALENDAR_UNITS:
            raise ValueError(f"{unit} has no fixed length")
        if unit not in UNITS:
            raise ValueError(f"unknown unit '{match.group(2)}'")
        total += _micros(_decimal(match.group(1)), UNITS[unit])
        position = match.end()
    if position == 0:
        raise ValueError("it is empty")
    return total


def _span_micros(text: str, first: str, last: str) -> int:
    """'0 00:01:00' DAY TO SECOND, '1:30' MINUTE TO SECOND."""
    if first not in SPAN_FIELDS or last not in SPAN_FIELDS or SPAN_FIELDS.index(first) > SPAN_FIELDS.index(last):
        raise ValueError(f"{first} TO {last} is not a span of fixed-length fields")
    fields = SPAN_FIELDS[SPAN_FIELDS.index(first) : SPAN_FIELDS.index(last) + 1]
    text = text.strip()
    sign = -1 if text.startswith("-") else 1
    parts = re.split(r"[ :]", text.lstrip("+-"))
    if len(parts) != len(fields):
        raise ValueError(f"'{text}' needs {len(fields)} fields for {first} TO {last}")
    return sign * sum(_micros(_decimal(part), unit) for part, unit in zip(parts, fields))


#: The units an interval literal may have (Flink's, and DuckDB's plurals of them).
INTERVAL_UNITS = ("MICROSECOND", "MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")


def check_interval_unit(e: exp.Interval) -> None:
    """Refuse an interval whose unit is no unit (``INTERVAL '2' SECNDS``), pointing at it, before
    the engine meets it in a running job."""
    unit = e.args.get("unit")
    if not isinstance(unit, exp.Var):
        return  # none (RisingWave's '10 seconds'), a span (DAY TO SECOND) or a precision (SECOND(3))
    name = unit.name.upper()
    if name in INTERVAL_UNITS or name.rstrip("S") in INTERVAL_UNITS or name in CALENDAR_UNITS:
        return
    raise error_at(e, f"unknown interval unit {unit.name} in {e.sql()}",
                   f"write one of {', '.join(INTERVAL_UNITS)}, e.g. INTERVAL '2' SECOND")

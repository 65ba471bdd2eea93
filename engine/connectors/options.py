"""Parsing the string values of a WITH (...) clause: booleans, sizes, durations, timestamps.

Every option value arrives as a string, as in Flink. ``value_problem`` says
what is wrong with a value for its ``OptionSpec.value_type``; the ``parse_*``
helpers turn a value that passed into a Python value.

``parse_duration`` is weir's one reader of durations (connector options, SET
settings, the STATE_TTL hint), with the rules of Flink's ``TimeUtils.parseDuration``:
a whole number, then optionally a unit — ``d``/``day``, ``h``/``hour``,
``min``/``m``/``minute``, ``s``/``sec``/``second``, ``ms``/``milli``/``millisecond``,
``µs``/``micro``/``microsecond``, ``ns``/``nano``/``nanosecond`` (the long forms
also plural), in any case, with or without a space: '30 s', '30 seconds', '5min'.
A bare number is milliseconds. weir adds ``us`` for ``µs``; a duration finer than a
microsecond (the engine's unit) is refused.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from weir.engine.connectors.base import OptionSpec
from weir.engine.errors import ConnectorOptionError

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

_EPOCH = datetime(1970, 1, 1)

#: Flink's duration units (``TimeUtils.TimeUnit``): (name, length in ns, labels); a long label
#: may also be plural.
_DURATION_UNITS = (
    ("DAYS", 86_400_000_000_000, ("d",), ("day",)),
    ("HOURS", 3_600_000_000_000, ("h",), ("hour",)),
    ("MINUTES", 60_000_000_000, ("min", "m"), ("minute",)),
    ("SECONDS", 1_000_000_000, ("s",), ("sec", "second")),
    ("MILLISECONDS", 1_000_000, ("ms",), ("milli", "millisecond")),
    ("MICROSECONDS", 1_000, ("µs", "us"), ("micro", "microsecond")),
    ("NANOSECONDS", 1, ("ns",), ("nano", "nanosecond")),
)
_DURATION_LABELS = {label: ns for _, ns, singular, plural in _DURATION_UNITS
                    for label in (*singular, *plural, *(p + "s" for p in plural))}
#: The accepted forms, for error messages.
DURATION_FORMS = ("a whole number and a unit: " + ", ".join(
    f"{name} ({' | '.join([*singular, *(f'{p} | {p}s' for p in plural)])})"
    for name, _, singular, plural in _DURATION_UNITS) + "; a bare number is milliseconds")
DURATION_EXAMPLES = "'30 s', '30 seconds', '500ms' or '5min'"
_DURATION = re.compile(r"([0-9]+)\s*(.*)", re.DOTALL)


def parse_bool(key: str, value: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise ConnectorOptionError(
            f"option '{key}' must be 'true' or 'false', not '{value}'",
            hint=f"write '{key}' = 'true' or '{key}' = 'false'",
        )
    return text == "true"


def parse_int(key: str, value: str, *, minimum: int = 0) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ConnectorOptionError(
            f"option '{key}' must be an integer of at least {minimum}, not '{value}'",
            hint=f"write for example '{key}' = '{max(minimum, 1)}'",
        )
    return number


def parse_size(key: str, value: str) -> int:
    """'128MB', '64 kb', '1gib' or a plain number of bytes."""
    match = _SIZE.match(value)
    if not match:
        raise ConnectorOptionError(
            f"option '{key}' must be a size such as '128MB', '64kb' or '1048576', not '{value}'"
        )
    unit = (match.group(2) or "").lower().rstrip("b").rstrip("i")
    return int(match.group(1)) * _SIZE_UNITS[unit]


def duration_micros(text: str) -> int:
    """A duration in Flink's syntax ('30 s', '30 seconds', '5min', '100' = 100 ms) in µs;
    ValueError saying what is wrong with it."""
    match = _DURATION.fullmatch(text.strip().lower())
    if not match:
        raise ValueError("it does not start with a whole number" if text.strip() else "it is empty")
    amount, label = int(match.group(1)), match.group(2).strip()
    if not label:
        return amount * 1_000  # milliseconds
    ns = _DURATION_LABELS.get(label)
    if ns is None:
        raise ValueError(f"'{match.group(2).strip()}' is not a unit")
    if amount * ns % 1_000:
        raise ValueError("it is finer than a microsecond")
    return amount * ns // 1_000


def parse_duration(key: str, value: str) -> int:
    """The duration option ``key`` (``duration_micros``) in µs; a clear error naming the
    accepted forms for anything else."""
    try:
        return duration_micros(value)
    except ValueError as reason:
        raise ConnectorOptionError(
            f"option '{key}' must be a duration such as {DURATION_EXAMPLES}, not '{value}': {reason}",
            hint=f"write {DURATION_FORMS}",
        ) from None


def parse_duration_seconds(key: str, value: str) -> float:
    """The duration option ``key`` (``parse_duration``) in seconds."""
    return parse_duration(key, value) / 1_000_000


def parse_char(key: str, value: str) -> str:
    """One character; '\\t' and 'tab' mean a tab."""
    text = {"\\t": "\t", "tab": "\t"}.get(value, value)
    if len(text) != 1:
        raise ConnectorOptionError(
            f"option '{key}' must be a single character, not '{value}'",
            hint=f"write for example '{key}' = ';' (or '\\t' for a tab)",
        )
    return text


def parse_timestamp_us(key: str, value: str) -> int:
    """'2024-01-01 00:00:00[.ffffff]' (no time zone: UTC) as µs since the epoch."""
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ConnectorOptionError(
            f"option '{key}' must be a timestamp such as '2024-01-01 00:00:00', not '{value}'"
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_PARSERS = {
    "bool": lambda k, v: parse_bool(k, v),
    "int": lambda k, v: parse_int(k, v, minimum=0),
    "positive-int": lambda k, v: parse_int(k, v, minimum=1),
    "size": parse_size,
    "char": parse_char,
    "duration": parse_duration_seconds,
    "timestamp": parse_timestamp_us,
}


def value_problem(key: str, value: str, spec: OptionSpec) -> ConnectorOptionError | None:
    """The error for a value that does not fit its option, or None."""
    if spec.choices and value not in spec.choices:
        allowed = ", ".join(f"'{c}'" for c in spec.choices)
        return ConnectorOptionError(
            f"option '{key}' must be one of {allowed}, not '{value}'",
            hint=f"write for example '{key}' = '{spec.choices[0]}'",
        )
    parser = _PARSERS.get(spec.value_type)
    if parser is not None:
        try:
            parser(key, value)
        except ConnectorOptionError as error:
            return error
    return None

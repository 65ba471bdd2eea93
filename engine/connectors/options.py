"""Parsing the string values of a WITH (...) clause: booleans, sizes, timestamps.

Every option value arrives as a string, as in Flink. ``value_problem`` says
what is wrong with a value for its ``OptionSpec.value_type``; the ``parse_*``
helpers turn a value that passed into a Python value.
"""
from __future__ import annotations

import re
from datetime import datetime, timezone

from weir.engine.connectors.base import OptionSpec
from weir.engine.errors import ConnectorOptionError

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?i?b?)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}

_EPOCH = datetime(1970, 1, 1)

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|min|m|h)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "": 1.0, "s": 1.0, "sec": 1.0, "min": 60.0, "m": 60.0, "h": 3600.0}


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


def parse_duration_seconds(key: str, value: str) -> float:
    """'30s', '500ms', '2min', '1h' or a plain number of seconds."""
    match = _DURATION.match(value)
    if not match:
        raise ConnectorOptionError(
            f"option '{key}' must be a duration such as '30s', '500ms' or '2min', not '{value}'"
        )
    return float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "").lower()]


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

"""Interval literals, in microseconds."""
import pytest
import sqlglot

from weir.sql import WeirSqlError, interval_micros
from weir.sql.dialect import Weir

SECOND = 1_000_000


def interval(text: str):
    return sqlglot.parse_one(f"SELECT\n  {text}", read=Weir).expressions[0]


@pytest.mark.parametrize(
    "text, micros",
    [
        ("INTERVAL '10' SECOND", 10 * SECOND),
        ("INTERVAL '1' MINUTE", 60 * SECOND),
        ("INTERVAL '2' HOUR", 7200 * SECOND),
        ("INTERVAL '1' DAY", 86400 * SECOND),
        ("INTERVAL '500' MILLISECOND", SECOND // 2),
        ("INTERVAL '1.5' SECOND", 3 * SECOND // 2),
        ("INTERVAL '10 seconds'", 10 * SECOND),
        ("INTERVAL '1 minute 30 seconds'", 90 * SECOND),
        ("INTERVAL '1' SECOND(3)", SECOND),
        ("INTERVAL '2' MINUTE(3)", 120 * SECOND),
        ("INTERVAL 10 SECOND", 10 * SECOND),
        ("INTERVAL '10' SECONDS", 10 * SECOND),
        ("INTERVAL '-2' SECOND", -2 * SECOND),
        ("INTERVAL '0 00:01:00' DAY TO SECOND", 60 * SECOND),
        ("INTERVAL '1 02:00:00' DAY TO SECOND", 26 * 3600 * SECOND),
        ("INTERVAL '1:30' MINUTE TO SECOND", 90 * SECOND),
        ("INTERVAL '1:30' HOUR TO MINUTE", 5400 * SECOND),
    ],
)
def test_interval_micros(text, micros):
    assert interval_micros(interval(text)) == micros


@pytest.mark.parametrize(
    "text, reason",
    [
        ("INTERVAL '1' MONTH", "MONTH has no fixed length"),
        ("INTERVAL '1' YEAR", "YEAR has no fixed length"),
        ("INTERVAL 'ten' SECOND", "'ten' is not a number"),
        ("INTERVAL '10'", "expected a number and a unit"),
        ("INTERVAL '1.0000001' SECOND", "finer than a microsecond"),
        ("INTERVAL '1:30' DAY TO SECOND", "needs 4 fields"),
    ],
)
def test_unknown_interval_forms_raise_with_position(text, reason):
    with pytest.raises(WeirSqlError) as raised:
        interval_micros(interval(text))
    assert reason in str(raised.value)
    assert (raised.value.line, raised.value.col) == (2, 3), "points at INTERVAL"
    assert "INTERVAL '10' SECOND" in raised.value.hint


def test_a_non_interval_is_an_error_too():
    with pytest.raises(WeirSqlError) as raised:
        interval_micros(interval("10"))
    assert "expected an interval, got 10" in str(raised.value)
    assert (raised.value.line, raised.value.col) == (2, 3)

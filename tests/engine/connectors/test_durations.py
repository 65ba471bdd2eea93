"""One duration parser for every layer, with Flink's rules (``TimeUtils.parseDuration``):
connector options, SET settings and the STATE_TTL hint read '30 seconds' alike."""
import pyarrow as pa
import pytest

from weir.engine.connectors.duckdb_table import DuckDBTableSink
from weir.engine.connectors.options import duration_micros, parse_duration, parse_duration_seconds
from weir.engine.errors import ConnectorOptionError
from weir.planner.settings import check_setting
from weir.planner.planner import plan_script
from weir.sql import WeirSqlError, parse

SECOND = 1_000_000


@pytest.mark.parametrize("text, micros", [
    ("100", 100_000),  # as in Flink: a bare number is milliseconds
    ("0", 0),
    ("30 s", 30 * SECOND), ("30s", 30 * SECOND), ("30 sec", 30 * SECOND), ("30 secs", 30 * SECOND),
    ("30 second", 30 * SECOND), ("30 seconds", 30 * SECOND), ("30 SECONDS", 30 * SECOND),
    ("5min", 300 * SECOND), ("5 m", 300 * SECOND), ("1 minute", 60 * SECOND), ("2 minutes", 120 * SECOND),
    ("2h", 7200 * SECOND), ("1 hour", 3600 * SECOND), ("3 hours", 3 * 3600 * SECOND),
    ("1 d", 86400 * SECOND), ("1 day", 86400 * SECOND), ("2 days", 2 * 86400 * SECOND),
    ("500ms", SECOND // 2), ("500 milli", SECOND // 2), ("500 millis", SECOND // 2),
    ("1 millisecond", 1000), ("7 milliseconds", 7000),
    ("250us", 250), ("250 µs", 250), ("1 micro", 1), ("3 microseconds", 3),
    ("5000ns", 5), ("2000 nanos", 2), ("1000 nanosecond", 1),
    ("  42 s  ", 42 * SECOND),
])
def test_flink_duration_syntax(text, micros):
    assert duration_micros(text) == micros
    assert parse_duration("some.option", text) == micros
    assert parse_duration_seconds("some.option", text) == micros / SECOND


@pytest.mark.parametrize("text, reason", [
    ("", "it is empty"),
    ("fast", "it does not start with a whole number"),
    ("-5s", "it does not start with a whole number"),
    ("5 parsecs", "'parsecs' is not a unit"),
    ("3 months", "'months' is not a unit"),  # no fixed length
    ("1.5s", "'.5s' is not a unit"),  # Flink: a whole number
    ("1m30s", "'m30s' is not a unit"),  # Flink: one amount
    ("1ns", "it is finer than a microsecond"),
])
def test_a_bad_duration_is_refused_naming_the_accepted_forms(text, reason):
    with pytest.raises(ConnectorOptionError) as raised:
        parse_duration("sink.lock-timeout", text)
    assert raised.value.message == (f"option 'sink.lock-timeout' must be a duration such as '30 s', "
                                    f"'30 seconds', '500ms' or '5min', not '{text}': {reason}")
    assert "SECONDS (s | sec | secs | second | seconds)" in raised.value.hint
    assert "a bare number is milliseconds" in raised.value.hint


def test_a_connector_option_and_a_setting_read_the_same_durations(tmp_path):
    sink = DuckDBTableSink({"connector": "duckdb", "path": str(tmp_path / "x.duckdb"), "table-name": "t",
                            "sink.lock-timeout": "30 seconds"}, pa.schema([("id", pa.int64())]))
    assert sink.lock_timeout == 30.0
    assert check_setting("execution.checkpointing.interval", value="30 seconds") is None
    assert check_setting("table.exec.state.ttl", value="30 seconds") is None
    assert check_setting("table.exec.source.idle-timeout", value="250") is None  # 250 ms
    problem = check_setting("table.exec.state.ttl", value="soon")
    assert problem.message.startswith("setting 'table.exec.state.ttl' must be a duration such as '30 s'")
    assert "a bare number is milliseconds" in problem.message


def test_state_ttl_hint_reads_flink_durations_and_names_the_forms():
    ddl = ("CREATE TABLE a (id BIGINT) WITH ('connector' = 'nexmark', 'table' = 'person', 'events' = '10');\n"
           "CREATE TABLE b (auction BIGINT) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '10');\n"
           "CREATE TABLE s (id BIGINT) WITH ('connector' = 'blackhole');\n")
    hinted = "INSERT INTO s SELECT /*+ STATE_TTL('b' = '{}') */ a.id FROM a JOIN b ON a.id = b.auction;"
    plan_script(parse(ddl + hinted.format("30 seconds")))
    with pytest.raises(WeirSqlError) as raised:
        plan_script(parse(ddl + hinted.format("30 fortnights")))
    problem = raised.value.problems[0]
    assert problem.message.endswith("STATE_TTL for `b`: cannot read the duration '30 fortnights': "
                                    "'fortnights' is not a unit")
    assert "SECONDS (s | sec | secs | second | seconds)" in problem.hint

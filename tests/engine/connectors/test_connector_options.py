"""Option validation for WITH (...) clauses: the registry collects every problem."""
import pyarrow as pa
import pytest

from weir.engine.connectors.registry import CONNECTORS, connector_spec, create_sink, create_source, validate_options
from weir.engine.errors import ConnectorOptionError

SCHEMA = pa.schema([("id", pa.int64())])


def messages(options, role="source"):
    return [str(p) for p in validate_options(options, role)]


def test_valid_options_have_no_problems():
    assert validate_options({"connector": "filesystem", "path": "x", "format": "csv",
                             "csv.ignore-parse-errors": "true"}, "source") == []
    assert validate_options({"connector": "nexmark", "table": "auction", "events": "100"}, "source") == []
    assert validate_options({"connector": "duckdb", "path": "x.db", "table-name": "t"}, "sink") == []


def test_known_connectors():
    assert {"filesystem", "nexmark", "print", "blackhole", "duckdb"} <= set(CONNECTORS)


def test_unknown_connector_lists_the_known_ones():
    with pytest.raises(ConnectorOptionError) as error:
        connector_spec("filesytem")
    assert "'filesystem'" in error.value.message and "'nexmark'" in error.value.message
    assert error.value.hint == "did you mean 'filesystem'?"


def test_missing_connector():
    [problem] = validate_options({"path": "x"}, "source")
    assert "no 'connector' option" in problem.message


def test_unknown_key_suggests_the_closest():
    [problem] = validate_options({"connector": "filesystem", "path": "x", "format": "csv",
                                  "csv.ignore-parse-error": "true"}, "source")
    assert "no option 'csv.ignore-parse-error'" in problem.message
    assert problem.hint == "did you mean 'csv.ignore-parse-errors'?"


def test_bad_format_value():
    [problem] = validate_options({"connector": "filesystem", "path": "x", "format": "xml"}, "source")
    assert "'format' must be one of 'csv', 'json', 'parquet', 'debezium-json', not 'xml'" in problem.message


def test_missing_required_options_are_all_reported():
    problems = messages({"connector": "filesystem"})
    assert len(problems) == 2
    assert any("'path'" in p for p in problems) and any("'format'" in p for p in problems)


def test_format_specific_key_with_another_format():
    [problem] = validate_options({"connector": "filesystem", "path": "x", "format": "json",
                                  "csv.field-delimiter": ";"}, "source")
    assert "only applies to format 'csv'" in problem.message


def test_typed_values():
    problems = messages({"connector": "nexmark", "events": "many", "splits": "0",
                         "base-time": "yesterday"})
    assert len(problems) == 3
    assert any("'events' must be an integer" in p for p in problems)
    assert any("'splits' must be an integer of at least 1" in p for p in problems)
    assert any("'base-time' must be a timestamp" in p for p in problems)


def test_connector_used_in_the_wrong_role():
    [problem] = validate_options({"connector": "print"}, "source")
    assert "can only be used as a sink" in problem.message
    [problem] = validate_options({"connector": "nexmark"}, "sink")
    assert "can only be used as a source" in problem.message


def test_create_raises_every_problem_together():
    with pytest.raises(ConnectorOptionError) as error:
        create_source({"connector": "filesystem", "format": "xml"}, SCHEMA)
    assert "2 problems" in error.value.message
    with pytest.raises(ConnectorOptionError):
        create_sink({"connector": "duckdb", "path": "x.db"}, SCHEMA)


def test_register_connector_makes_a_connector_known_once(monkeypatch):
    from weir.engine.connectors import blackhole, registry
    from weir.engine.connectors.base import ConnectorSpec

    monkeypatch.setattr(registry, "CONNECTORS", dict(registry.CONNECTORS))
    spec = ConnectorSpec(name="nowhere", source=None, sink=blackhole.SPEC.sink, options={})
    assert "unknown connector 'nowhere'" in messages({"connector": "nowhere"}, "sink")[0]
    registry.register_connector(spec)
    registry.register_connector(spec)  # again: nothing changes
    assert validate_options({"connector": "nowhere"}, "sink") == []
    assert isinstance(create_sink({"connector": "nowhere"}, SCHEMA), blackhole.SPEC.sink)
    with pytest.raises(ValueError, match="a connector named 'nowhere' is already registered"):
        registry.register_connector(ConnectorSpec(name="nowhere", source=None, sink=blackhole.SPEC.sink, options={}))

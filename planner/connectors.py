"""Checking a table's WITH (...) options against the engine's connector catalogue."""
from __future__ import annotations

from weir.engine.connectors.registry import CONNECTORS, validate_options
from weir.engine.errors import ConnectorOptionError
from weir.planner.catalog import TableDef
from weir.planner.locate import locate, quoted
from weir.sql.errors import Problem, WeirSqlError


def check_connector(table: TableDef, role: str) -> None:
    """Raise every problem with ``table``'s options for use as a source or sink, each
    pointing at the option it names in the CREATE TABLE (or at its WITH)."""
    problems = []
    for error in validate_options(table.options, role):
        line, col = _where(table, error)
        problems.append(Problem(f"table `{table.name}`: {error.message}", line, col, error.hint))
    if problems:
        raise WeirSqlError(problems)


def _where(table: TableDef, error: ConnectorOptionError) -> tuple[int, int]:
    """The option ``error`` is about in the CREATE TABLE, or its WITH (an option that is missing)."""
    if error.option is not None and error.option in table.options:
        return locate(table.statement, quoted(error.option) + r"\s*=", after=r"\bWITH\b")
    return locate(table.statement, r"\bWITH\b")


def reads_changes(options: dict[str, str]) -> bool:
    """Whether a source of these options yields a changelog (rows ending with the row kind):
    a connector keyed by its PRIMARY KEY ('upsert-kafka') or a changelog format it can read
    ('debezium-json' from Kafka)."""
    spec = CONNECTORS.get(options.get("connector", ""))
    if spec is None:
        return False
    fmt = options.get("value.format") or options.get("format")
    return spec.keyed_by_primary_key or (fmt in spec.changelog_formats and fmt not in spec.sink_only_formats)

"""The connectors weir knows, by the name a WITH ('connector' = ...) clause uses.

``validate_options`` collects every problem of a WITH clause so the planner
can report them together; ``create_source`` and ``create_sink`` validate and
build. Option names are Flink's wherever Flink has one.

A connector's module is imported the first time its name is looked up, not
when the registry is (``engine.lazy_registry``): a job reading nexmark into a
blackhole loads neither Kafka's formats, the filesystem's readers nor DuckDB's
snapshot publisher.
"""
from __future__ import annotations

import difflib
from collections.abc import MutableMapping

import pyarrow as pa

from weir.engine.connectors.base import DEFAULT_BATCH_SIZE, ConnectorSpec, OptionSpec, Sink, Source
from weir.engine.connectors.options import value_problem
from weir.engine.errors import ConnectorOptionError
from weir.engine.lazy_registry import LazyRegistry

#: Where each built-in connector's spec is defined.
BUILT_IN = {
    "filesystem": "weir.engine.connectors.filesystem:SPEC",
    "nexmark": "weir.engine.connectors.nexmark:SPEC",
    "print": "weir.engine.connectors.print_sink:SPEC",
    "blackhole": "weir.engine.connectors.blackhole:SPEC",
    "duckdb": "weir.engine.connectors.duckdb_table:SPEC",
    "python": "weir.engine.connectors.python_source:SPEC",
    "datagen": "weir.engine.connectors.datagen:SPEC",
    "kafka": "weir.engine.connectors.kafka:SPEC",
    "upsert-kafka": "weir.engine.connectors.kafka:UPSERT_SPEC",
}

#: Connector specs by name; a built-in one's module is imported when its name is first looked up.
CONNECTORS: MutableMapping[str, ConnectorSpec] = LazyRegistry(BUILT_IN)

ROLES = ("source", "sink")

#: Options every source accepts, read by the runtime rather than the connector.
SOURCE_OPTIONS = {
    "source.idle-timeout": OptionSpec(
        "a split with no rows for this long stops holding the watermark back", value_type="duration"),
    "source.late-rows.table": OptionSpec(
        "rows a window drops as late land in this table of the job's result database"),
}


def register_connector(spec: ConnectorSpec) -> None:
    """Make a connector known under ``spec.name`` (e.g. the shell's live result sink).
    Registering the same spec again changes nothing; another spec under a known name is refused."""
    known = CONNECTORS.get(spec.name)  # a built-in one of that name is imported to compare
    if known is not None and known is not spec:
        raise ValueError(f"a connector named '{spec.name}' is already registered")
    CONNECTORS[spec.name] = spec


def connector_spec(name: str) -> ConnectorSpec:
    spec = CONNECTORS.get(name)
    if spec is None:
        known = ", ".join(f"'{n}'" for n in sorted(CONNECTORS))
        close = difflib.get_close_matches(name, list(CONNECTORS), n=1)
        hint = f"did you mean '{close[0]}'?" if close else f"use one of {known}"
        raise ConnectorOptionError(
            f"unknown connector '{name}'; the known connectors are {known}", hint=hint
        )
    return spec


def validate_options(options: dict[str, str], role: str) -> list[ConnectorOptionError]:
    """Every problem with a WITH (...) clause for a table used as ``role``.

    Checks, in order: 'connector' present and known, usable as ``role``,
    unknown keys (with the closest known key), required options, enumerated
    and typed values, and format-specific keys used with another format.
    """
    if role not in ROLES:
        raise ValueError(f"role must be 'source' or 'sink', not {role!r}")
    name = options.get("connector")
    if name is None:
        known = ", ".join(f"'{n}'" for n in sorted(CONNECTORS))
        return [
            ConnectorOptionError(
                "the WITH clause has no 'connector' option",
                hint=f"add 'connector' = '...' with one of {known}",
            )
        ]
    try:
        spec = connector_spec(name)
    except ConnectorOptionError as error:
        error.option = "connector"
        return [error]
    if (spec.source if role == "source" else spec.sink) is None:
        usable = [n for n, s in sorted(CONNECTORS.items()) if (s.source if role == "source" else s.sink)]
        other = "sink" if role == "source" else "source"
        error = ConnectorOptionError(f"connector '{name}' can only be used as a {other}, not as a {role}",
                                     hint=f"connectors usable as a {role}: " + ", ".join(f"'{n}'" for n in usable))
        error.option = "connector"
        return [error]

    problems: list[ConnectorOptionError] = []
    general = {**spec.options, **(SOURCE_OPTIONS if role == "source" else {})}
    by_format = spec.format_options
    every_format_key = {key: fmt for fmt, keys in by_format.items() for key in keys}
    known_keys = ["connector", *general, *every_format_key]

    chosen_format = options.get("format")
    for key, value in options.items():
        if key == "connector":
            continue
        if key in general:
            problem = value_problem(key, value, general[key])
        elif key in every_format_key:
            fmt = every_format_key[key]
            if chosen_format is not None and key not in by_format.get(chosen_format, {}):
                problem = ConnectorOptionError(
                    f"option '{key}' only applies to format '{fmt}', but the table's format is '{chosen_format}'",
                    hint=f"remove '{key}' or set 'format' = '{fmt}'",
                )
            else:
                problem = value_problem(key, value, by_format[fmt][key])
        elif key.startswith(spec.option_prefixes) and key not in spec.option_prefixes:
            problem = None  # the connector's own or its client's, checked as the source is made
        else:
            problem = _unknown_key(name, key, known_keys)
        if problem is not None:
            problem.option = key
            problems.append(problem)

    if role == "source" and chosen_format in spec.sink_only_formats:
        readable = [f for f in general["format"].choices if f not in spec.sink_only_formats]
        problems.append(ConnectorOptionError(
            f"format '{chosen_format}' can only be written by a sink, not read by a source",
            hint="read " + ", ".join(f"'{f}'" for f in readable)))
    for key, option in general.items():
        if option.required and key not in options:
            problems.append(_missing(name, key, option))
    return problems


def _unknown_key(connector: str, key: str, known_keys: list[str]) -> ConnectorOptionError:
    close = difflib.get_close_matches(key, known_keys, n=1, cutoff=0.5)
    listing = ", ".join(f"'{k}'" for k in known_keys)
    hint = f"did you mean '{close[0]}'?" if close else f"the options of '{connector}' are {listing}"
    return ConnectorOptionError(f"connector '{connector}' has no option '{key}'", hint=hint)


def _missing(connector: str, key: str, option: OptionSpec) -> ConnectorOptionError:
    example = f"'{option.choices[0]}'" if option.choices else "'...'"
    return ConnectorOptionError(
        f"connector '{connector}' needs the option '{key}' ({option.description})",
        hint=f"add '{key}' = {example} to the WITH clause",
    )


def _raise_problems(problems: list[ConnectorOptionError]) -> None:
    if len(problems) == 1:
        raise problems[0]
    if problems:
        text = "; ".join(str(p).replace("\n  hint: ", " (") + (")" if p.hint else "") for p in problems)
        raise ConnectorOptionError(f"{len(problems)} problems in the WITH clause: {text}")


def create_source(
    options: dict[str, str], schema: pa.Schema, batch_size: int = DEFAULT_BATCH_SIZE
) -> Source:
    _raise_problems(validate_options(options, "source"))
    source_class = connector_spec(options["connector"]).source
    return source_class(options, schema, batch_size=batch_size)


def create_sink(options: dict[str, str], schema: pa.Schema, subtask_index: int = 0) -> Sink:
    _raise_problems(validate_options(options, "sink"))
    sink_class = connector_spec(options["connector"]).sink
    return sink_class(options, schema, subtask_index=subtask_index)

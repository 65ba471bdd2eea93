"""Updating streams in the planner: which operators accept them, and how EXPLAIN names
each operator's changelog mode (like Flink's ``changelogMode``)."""
from __future__ import annotations


from sqlglot import exp

from weir.engine.changelog import APPEND, RETRACT, UPSERT, is_changelog
from weir.engine.connectors.registry import CONNECTORS
from weir.engine.graph import OperatorNode
from weir.engine.operators.registry import operator_class
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.sql.errors import Problem, WeirSqlError


def require_append_only(qp: QueryPlanning, stream: Stream, what: str, node: exp.Expression | None) -> None:
    """Refuse ``what`` (a window aggregate, a window join, ...) over an updating stream."""
    if stream.append_only:
        return
    raise qp.fail(
        f"{what} over an updating stream (the result of a GROUP BY without a window over `{stream.name}`) "
        "is not supported; it needs append-only input", node,
        "apply the window to the append-only table first (window aggregates over a TUMBLE/HOP/CUMULATE/"
        "SESSION of the source), or aggregate the updating result with another GROUP BY without a window")


#: EXPLAIN's spelling of each mode: the row kinds, as Flink's changelogMode names them.
KINDS = {APPEND: "[I]", RETRACT: "[I,UB,UA,D]", UPSERT: "[I,UA,D]"}


def changelog_mode(node: OperatorNode) -> str:
    """``append [I]``, ``retract [I,UB,UA,D]``, or for a sink that applies the changes
    by a key, ``upsert [I,UA,D] by (key)`` (per key the last change of a commit wins: +I/+U
    replace the row, -U/-D delete it)."""
    if operator_class(node.kind).commits_output:
        config = node.typed_config()
        mode, key = config.changelog or APPEND, config.upsert_key
        by = f" by ({', '.join(key) or 'one row'})" if mode == UPSERT and key is not None else ""
        return f"{mode} {KINDS[mode]}{by}"
    if is_changelog(node.output_schema):
        return f"{RETRACT} {KINDS[RETRACT]}"
    return f"{APPEND} {KINDS[APPEND]}"


def sink_changelog(stream: Stream, options: dict[str, str], *, name: str, what: str,
                   primary_key: list[str] | None, where: tuple[int, int]) -> dict:
    """How a sink takes ``stream``: the sink node's config additions, ``{"changelog": mode,
    "upsert_key": [...]}`` ({} for an append-only sink of append-only rows). A DuckDB table
    with a key (a PRIMARY KEY, or a materialized view's grouping key) is maintained by upsert;
    print, blackhole and Python callback sinks and 'debezium-json' files take the changes as they are
    (with their kinds); other
    sinks are append-only and refuse an updating stream."""
    connector = options.get("connector", "")
    if connector == "duckdb":
        # A table is kept by its declared PRIMARY KEY; a view by its query's key.
        view = what == "materialized view"
        key = (stream.upsert_key if not stream.append_only else None) if view else (primary_key or None)
        if key is not None:
            return {"changelog": UPSERT, "upsert_key": list(key)}
        if stream.append_only:
            return {}
        if view:  # no key (a join's rows, a projection without the GROUP BY keys): a multiset
            return {"changelog": RETRACT}
        raise WeirSqlError(Problem(
            f"the DuckDB table `{name}` has no PRIMARY KEY, so it cannot be maintained from an updating "
            f"query (the result of a GROUP BY without a window over `{stream.name}`)", *where,
            f"declare the key in `{name}`: PRIMARY KEY (<the GROUP BY keys>) NOT ENFORCED"))
    spec = CONNECTORS.get(connector)
    if spec is not None and spec.keyed_by_primary_key:  # upsert-kafka: keyed changes, tombstones for deletes
        if not primary_key:
            raise WeirSqlError(Problem(f"the {what} `{name}` ('{connector}' connector) needs a PRIMARY KEY", *where,
                                       f"declare it in `{name}`: PRIMARY KEY (<key columns>) NOT ENFORCED"))
        return {} if stream.append_only else {"changelog": UPSERT, "upsert_key": list(primary_key)}
    if stream.append_only:
        return {}
    if connector in ("print", "blackhole", "python") or (spec is not None and options.get("format") in spec.changelog_formats):
        return {"changelog": RETRACT}
    fmt = f", format '{options['format']}'" if "format" in options else ""
    raise WeirSqlError(Problem(
        f"the {what} `{name}` ('{connector}' connector{fmt}) is append-only and cannot take an updating "
        f"query (a GROUP BY without a window over `{stream.name}`, whose rows are updated and deleted)",
        *where,
        "write the changes with 'format' = 'debezium-json', keep the current result in a DuckDB table "
        "(CREATE MATERIALIZED VIEW, or 'connector' = 'duckdb' with PRIMARY KEY (...) NOT ENFORCED), "
        "or aggregate over a window (TUMBLE, HOP, CUMULATE, SESSION) for an append-only result"))

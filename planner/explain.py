"""EXPLAIN text for a JobGraph: each operator, what it computes, its key and
partitioning, the state it keeps and its changelog mode (``planner.changelog``).

One block per operator, in topological order::

    auction_counts.window_aggregate
      computes:  WindowAggregate(window=[TUMBLE(date_time, 10 s)], groupBy=[auction], ...)
      input:     bids.source by hash(auction)
      key:       auction
      state:     window accumulators per (auction, window), dropped when the watermark passes window_end
      output:    auction BIGINT, window_start TIMESTAMP(3), ...
      changelog: append [I]

At parallelism above 1 a window aggregate computed in two phases (Flink's local-global
aggregation, ``engine.runtime.exchange.pre_aggregated``) says so on a line of its own::

      phases:    local-global: each subtask of bids.source pre-aggregates its rows per (auction) and
                 window slice before the exchange by hash(auction); only the partials cross, merged here
                 ('table.optimizer.agg-phase-strategy' = 'AUTO'; 'ONE_PHASE' sends the rows)
"""
from __future__ import annotations

import re

from weir.engine.graph import LATE_ROWS_PORT, Edge, JobGraph, OperatorNode
from weir.engine.operators.registry import operator_class
from weir.engine.runtime.exchange import AGG_PHASE_STRATEGY, pre_aggregated
from weir.planner.changelog import changelog_mode
from weir.planner.types import sql_name


def explain(graph: JobGraph, title: str | None = None, metrics: dict | None = None) -> str:
    """The plan of ``graph``, under the heading ``== <title> ==`` (default: ``job <name>``).

    With ``metrics`` (operator id -> the run's ``OperatorMetrics``: ``rows_in``, ``rows_out``,
    ``counters``), each operator also says what it did (``weir run --analyze``)."""
    lines = [f"== {title or f'job {graph.name}'} =="]
    for node in graph.nodes:
        lines.extend(_node(node))
        lines.extend(_phases(node, graph.settings))
        if metrics is not None and node.id in metrics:
            lines.append(f"  actual:    {_actual(node, metrics[node.id])}")
    return "\n".join(lines) + "\n"


def _actual(node: OperatorNode, m) -> str:
    """Rows in and out, and the rows dropped as late per source table."""
    kind = operator_class(node.kind)
    parts = [] if kind.reads_source else [f"rows in {m.rows_in:,}"]
    if not kind.commits_output:
        parts.append(f"rows out {m.rows_out:,}")
    late = m.counters.get("late_rows_dropped", 0)
    if late or kind.windowed:
        by_source = [f"{source} {n:,}" for source, n in sorted(m.late_by_source.items()) if n]
        parts.append(f"late rows dropped {late:,}" + (f" ({', '.join(by_source)})" if by_source else ""))
    for name, n in sorted(m.counters.items()):
        if name in ("null_time_rows_dropped", "malformed_rows_skipped") and n:
            parts.append(f"{name.replace('_', ' ')} {n:,}")
    return ", ".join(parts)


_QUOTED_NAME = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"')


def display(sql: str) -> str:
    """Generated SQL as a person would write it: simple names unquoted."""
    return _QUOTED_NAME.sub(r"\1", sql)


def _node(node: OperatorNode) -> list[str]:
    """The operator's block: what the plan says of it, and its key and state as its class
    renders them from its config (``OperatorKind.explain``)."""
    kind = operator_class(node.kind)
    columns = ", ".join(f"{f.name} {sql_name(f.type)}" for f in node.output_schema)
    return [
        node.id,
        f"  computes:  {display(node.description)}",
        f"  input:     {', '.join(_edge(e) for e in node.inputs) or '-'}",
        *(f"  {line}" for line in kind.explain(node.config)),
        f"  output:    {columns if not kind.commits_output else '-'}",
        f"  changelog: {_changelog(node)}",
    ]


def _phases(node: OperatorNode, settings: dict) -> list[str]:
    """The two-phase line of an operator whose input crosses an exchange as partial aggregates
    (none at parallelism 1: there is no exchange, and one phase)."""
    if int(settings.get("parallelism.default") or 1) <= 1:
        return []
    edges = [e for e in node.inputs if pre_aggregated(node, e, settings)]
    if not edges:
        return []
    keys = ", ".join(edges[0].keys)
    strategy = str(settings.get(AGG_PHASE_STRATEGY) or "AUTO").strip().upper()
    return [f"  phases:    local-global: each subtask of {edges[0].source} pre-aggregates its rows per ({keys}) and",
            f"             window slice before the exchange by hash({keys}); only the partials cross, merged here",
            f"             ('{AGG_PHASE_STRATEGY}' = '{strategy}'; 'ONE_PHASE' sends the rows)"]


def _edge(edge: Edge) -> str:
    if edge.port == LATE_ROWS_PORT:
        return f"{edge.source} (late rows)"
    if edge.partitioning == "hash":
        return f"{edge.source} by hash({', '.join(edge.keys)})"
    return f"{edge.source} ({edge.partitioning})"


def _changelog(node: OperatorNode) -> str:
    """The row kinds the operator emits (``planner.changelog.changelog_mode``)."""
    return changelog_mode(node)

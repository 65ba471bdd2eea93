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
"""
from __future__ import annotations

import re

from weir.engine.connectors.registry import CONNECTORS
from weir.engine.graph import LATE_ROWS_PORT, Edge, JobGraph, OperatorNode
from weir.engine.operators.base import late_counter
from weir.planner.changelog import changelog_mode
from weir.planner.types import sql_name


def explain(graph: JobGraph, title: str | None = None, metrics: dict | None = None) -> str:
    """The plan of ``graph``, under the heading ``== <title> ==`` (default: ``job <name>``).

    With ``metrics`` (operator id -> the run's ``OperatorMetrics``: ``rows_in``, ``rows_out``,
    ``counters``), each operator also says what it did (``weir run --analyze``)."""
    lines = [f"== {title or f'job {graph.name}'} =="]
    for node in graph.nodes:
        lines.extend(_node(node))
        if metrics is not None and node.id in metrics:
            lines.append(f"  actual:    {_actual(node, metrics[node.id])}")
    return "\n".join(lines) + "\n"


def _actual(node: OperatorNode, m) -> str:
    """Rows in and out, and the rows dropped as late per source table."""
    parts = [] if node.kind == "source" else [f"rows in {m.rows_in:,}"]
    if node.kind != "sink":
        parts.append(f"rows out {m.rows_out:,}")
    late = m.counters.get("late_rows_dropped", 0)
    if late or node.kind in _WINDOWED:
        prefix = late_counter("")[:-1]  # 'late_rows_dropped['
        by_source = [f"{name[len(prefix):-1]} {n:,}" for name, n in sorted(m.counters.items())
                     if name.startswith(prefix) and n]
        parts.append(f"late rows dropped {late:,}" + (f" ({', '.join(by_source)})" if by_source else ""))
    for name, n in sorted(m.counters.items()):
        if name in ("null_time_rows_dropped", "malformed_rows_skipped") and n:
            parts.append(f"{name.replace('_', ' ')} {n:,}")
    return ", ".join(parts)


_WINDOWED = ("window_aggregate", "window_join", "window_rank", "session_window")


_QUOTED_NAME = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"')


def display(sql: str) -> str:
    """Generated SQL as a person would write it: simple names unquoted."""
    return _QUOTED_NAME.sub(r"\1", sql)


def _node(node: OperatorNode) -> list[str]:
    columns = ", ".join(f"{f.name} {sql_name(f.type)}" for f in node.output_schema)
    return [
        node.id,
        f"  computes:  {display(node.description)}",
        f"  input:     {', '.join(_edge(e) for e in node.inputs) or '-'}",
        f"  key:       {_key(node)}",
        f"  state:     {_state(node)}",
        f"  output:    {columns if node.kind != 'sink' else '-'}",
        f"  changelog: {_changelog(node)}",
    ]


def _edge(edge: Edge) -> str:
    if edge.port == LATE_ROWS_PORT:
        return f"{edge.source} (late rows)"
    if edge.partitioning == "hash":
        return f"{edge.source} by hash({', '.join(edge.keys)})"
    return f"{edge.source} ({edge.partitioning})"


def _key(node: OperatorNode) -> str:
    """The columns that partition the operator's keyed state."""
    if node.kind == "window_aggregate":
        return ", ".join(name for name, _ in node.config["keys"]) or "- (one global group per window)"
    if node.kind == "session_window":
        return ", ".join(name for name, _ in node.config["keys"]) or "- (one global sequence of sessions)"
    if node.kind == "group_aggregate":
        return ", ".join(name for name, _ in node.config["keys"]) or "- (one global group)"
    if node.kind == "window_join":
        left, right = node.config["left"]["keys"], node.config["right"]["keys"]
        return f"{', '.join(left)} | {', '.join(right)}" if left else "- (one group per window)"
    if node.kind == "window_rank":
        return ", ".join(node.config["partition_keys"]) or "- (one ranking per window)"
    if node.kind == "top_n":
        return ", ".join(node.config["partition_keys"]) or "- (one ranking of the whole stream)"
    if node.kind == "limit":
        return "- (one count for the whole stream)"
    if node.kind in ("stream_join", "temporal_join"):
        return f"{', '.join(node.config['left']['keys'])} | {', '.join(node.config['right']['keys'])}"
    if node.kind == "interval_join":
        left, right = node.config["left"]["keys"], node.config["right"]["keys"]
        return f"{', '.join(left)} | {', '.join(right)}" if left else "- (one group)"
    if node.kind == "over_aggregate":
        return ", ".join(node.config["partition_keys"]) or "- (one partition)"
    return "-"


def _state(node: OperatorNode) -> str:
    if node.kind == "source":
        return "read offset per split"
    if node.kind == "calc":
        return "none"
    if node.kind == "window_aggregate":
        sliced = node.config["window"]["kind"] in ("hop", "cumulate")
        per = ", ".join([*(name for name, _ in node.config["keys"]), "slice" if sliced else "window"])
        if sliced:
            return (f"partial accumulators per ({per}), shared by the overlapping windows; a slice is "
                    "dropped when the watermark passes the end of its last window")
        return f"window accumulators per ({per}), dropped when the watermark passes window_end"
    if node.kind == "group_aggregate":
        per = ", ".join(name for name, _ in node.config["keys"]) or "the one group"
        retracting = not node.config.get("append_only_input")
        multisets = any((a["function"] in ("min", "max") and retracting) or
                        (a.get("distinct") and a["function"] not in ("min", "max")) for a in node.config["aggregates"])
        return (f"accumulators per ({per})" + (" and value counts for DISTINCT (and MIN/MAX of a retracting input)" if multisets else "")
                + "; a key is dropped when its row count falls to 0")
    if node.kind == "session_window":
        return ("open sessions per key with partial accumulators, merged when a row bridges them, "
                "dropped when the watermark passes their end")
    if node.kind == "window_join":
        return "rows of each input per (key, window), dropped when the watermark passes window_end"
    if node.kind == "window_rank":
        per = ", ".join([*node.config["partition_keys"], "window"])
        high = node.config["rank_range"][1]
        return (f"rows per ({per}), cut to those that can still rank within {high}, "
                "dropped when the watermark passes window_end")
    if node.kind == "stream_join":
        ttl = {side: ms for side, ms in (node.config.get("ttl_ms") or {}).items() if ms}
        kept = ("; " + ", ".join(f"{side} rows dropped {ms} ms after they arrived" for side, ms in ttl.items())
                if ttl else ", for ever (set 'table.exec.state.ttl' to bound it)")
        return f"every row of both inputs by key{kept}"
    if node.kind == "top_n":
        if node.config["append_only_input"]:
            return f"the top {node.config['rank_range'][1]} rows (and ties) per partition"
        return "every row per partition (an updating input may retract any of them)"
    if node.kind == "temporal_join":
        return ("rows waiting for the watermark to pass their time, and per key the versions they may "
                "still join: older versions dropped as the watermark passes")
    if node.kind == "lookup_join":
        if node.config["lookup"]["options"].get("connector") == "duckdb":
            return f"none (`{node.config['lookup']['table']}` is queried for every batch)"
        return f"`{node.config['lookup']['table']}`, read once when the job starts"
    if node.kind == "union":
        return "none"
    if node.kind == "limit":
        return f"the number of rows let through (at most {node.config['limit']})"
    if node.kind == "interval_join":
        return ("rows of each input per key, dropped when the watermark passes the last time a row "
                "of the other input could match them")
    if node.kind == "over_aggregate":
        frame = node.config["frame"]
        kept = {"rows": f"the last {frame.get('preceding')} rows per key",
                "range": "the rows of the last interval per key",
                "unbounded": "one running accumulator per key"}[frame["kind"]]
        return f"rows waiting for the watermark (sorted by time), and {kept}"
    if node.kind == "sink":
        spec = CONNECTORS.get(node.config["options"].get("connector", ""))
        if spec is not None and spec.sink is not None and not spec.sink.transactional:
            return "none (written as it arrives, not transactional)"
        return "output staged until the checkpoint commits (exactly-once)"
    return "see the operator"


def _changelog(node: OperatorNode) -> str:
    """The row kinds the operator emits (``planner.changelog.changelog_mode``)."""
    return changelog_mode(node)

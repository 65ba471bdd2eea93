"""EXPLAIN text for a JobGraph: each operator, what it computes, its key and
partitioning, the state it keeps and whether its output is append-only."""
from __future__ import annotations

import re

from engine.graph import JobGraph, OperatorNode
from planner.types import sql_name

_STATE = {
    "source": lambda n: "read offset per split",
    "calc": lambda n: "none",
    "window_aggregate": lambda n: (
        f"window accumulators per ({', '.join([*[k for k, _ in n.config['keys']], 'window'])}), "
        "dropped when the watermark passes window_end"
    ),
    "sink": lambda n: "output staged until commit",
}


def explain(graph: JobGraph) -> str:
    lines = [f"== job {graph.name} =="]
    for node in graph.nodes:
        lines.extend(_node(node))
    return "\n".join(lines) + "\n"


_QUOTED_NAME = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"')


def display(sql: str) -> str:
    """Generated SQL as a person would write it: simple names unquoted."""
    return _QUOTED_NAME.sub(r"\1", sql)


def _node(node: OperatorNode) -> list[str]:
    inputs = ", ".join(
        e.source + (f" by hash({', '.join(e.keys)})" if e.partitioning == "hash" else f" ({e.partitioning})")
        for e in node.inputs
    )
    key = ", ".join(node.inputs[0].keys) if node.inputs and node.inputs[0].keys else "-"
    columns = ", ".join(f"{f.name} {sql_name(f.type)}" for f in node.output_schema)
    return [
        node.id,
        f"  computes:  {display(node.description)}",
        f"  input:     {inputs or '-'}",
        f"  key:       {key}",
        f"  state:     {_STATE.get(node.kind, lambda n: 'see operator')(node)}",
        f"  output:    {columns if node.kind != 'sink' else '-'}",
        f"  changelog: append-only",
    ]

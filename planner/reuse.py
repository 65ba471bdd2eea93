"""Sub-plan reuse, as Flink's ``table.optimizer.reuse-sub-plan-enabled`` (on by default).

Two window aggregates that read the same input alike (the same edge) and compute the same
windows, keys, aggregates and HAVING run once: Nexmark q5 counts the bids per auction and window
twice, once for the rows it joins and once for their maximum. The second becomes a calc that
picks its columns from the first's output, each of its projection items being one of the
first's. Aggregates that keep late rows or bad rows (each writes its own to a table) are left
alone. EXPLAIN shows the calc reading the first aggregate.
"""
from __future__ import annotations

import dataclasses
import json

from weir.engine.graph import Edge, JobGraph, OperatorNode
from weir.engine.operators.calc import CalcConfig
from weir.planner.calc import calc_description
from weir.planner.expressions import quote

SETTING = "table.optimizer.reuse-sub-plan-enabled"


def reuse_sub_plans(graph: JobGraph) -> None:
    """Turn every window aggregate that repeats an earlier one into a calc over it (in place)."""
    if graph.settings.get(SETTING, "true").lower() != "true":
        return
    first: dict[tuple, OperatorNode] = {}
    for index, node in enumerate(graph.nodes):
        if node.kind != "window_aggregate":
            continue
        config = node.typed_config()
        if config.late_rows is not None or config.bad_rows:
            continue
        computes = json.dumps(dataclasses.replace(config, projection=()).to_json(), sort_keys=True)
        earlier = first.setdefault((tuple(node.inputs), computes), node)
        picks = None if earlier is node else _picks(node, earlier)
        if picks is not None:
            reuse = _fresh_id(graph, node.id.rsplit(".", 1)[0] + ".reuse")
            graph.nodes[index] = OperatorNode(
                reuse, "calc", CalcConfig(projection=picks), node.output_schema, [Edge(earlier.id)],
                calc_description([list(p) for p in picks], None, earlier.output_schema.names))
            for consumer in graph.nodes:
                consumer.inputs = [dataclasses.replace(e, source=reuse) if e.source == node.id else e
                                   for e in consumer.inputs]


def _fresh_id(graph: JobGraph, wanted: str) -> str:
    taken = {n.id for n in graph.nodes}
    return next(name for name in (wanted, *(f"{wanted}_{i}" for i in range(2, len(taken) + 2))) if name not in taken)


def _picks(node: OperatorNode, earlier: OperatorNode) -> tuple[tuple[str, str], ...] | None:
    """``node``'s projection as columns of ``earlier``'s output, or None when an item is not
    one of ``earlier``'s (with the same type)."""
    offered = {sql: name for name, sql in earlier.typed_config().projection}
    picks = []
    for name, sql in node.typed_config().projection:
        source = offered.get(sql)
        if source is None or earlier.output_schema.field(source).type != node.output_schema.field(name).type:
            return None
        picks.append((name, quote(source)))
    return tuple(picks)

"""The JobGraph: what the planner hands the engine.

Operators have stable ids derived from the plan, a ``kind`` naming the
operator class, a ``config`` (the kind's typed ``Config`` dataclass,
``engine.operators.config``; a JSON dict for sources and sinks) and an output schema. Edges say how
rows move from an upstream operator: ``forward`` (same subtask), ``hash``
(by key columns, into key groups) or ``broadcast``; an edge reads the
upstream operator's main output (port 0) or its late rows (``LATE_ROWS_PORT``:
rows a windowed operator dropped as late, for a source's late-rows table).
The graph serialises to JSON, and its fingerprint identifies it in checkpoints.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from weir.engine.operators.config import OperatorConfig
from weir.engine.operators.registry import operator_class
from weir.engine.schemas import schema_from_json, schema_to_json

PARTITIONINGS = ("forward", "hash", "broadcast")
#: The output port of a windowed operator that carries the rows it dropped as late.
LATE_ROWS_PORT = 1


@dataclass(frozen=True)
class Edge:
    source: str
    partitioning: str = "forward"
    keys: tuple[str, ...] = ()
    #: Which output of the source operator: 0 its result, LATE_ROWS_PORT its late rows.
    port: int = 0

    def __post_init__(self) -> None:
        if self.partitioning not in PARTITIONINGS:
            raise ValueError(f"unknown partitioning {self.partitioning!r}")


@dataclass
class OperatorNode:
    id: str
    kind: str  # "source", "calc", "window_aggregate", "sink"
    #: The kind's ``Config`` (``OperatorKind.Config``), or a JSON dict for a kind without one.
    config: OperatorConfig | dict[str, Any]
    output_schema: pa.Schema
    inputs: list[Edge] = field(default_factory=list)
    #: One line for EXPLAIN: what the operator computes.
    description: str = ""

    def typed_config(self) -> Any:
        """The config as the kind's ``Config`` (a graph built by hand may hold its JSON dict)."""
        return operator_class(self.kind).typed(self.config)

    def connector_options(self) -> dict[str, str]:
        """A source's or sink's connector options (its table's WITH (...)); empty for an operator."""
        kind = operator_class(self.kind)
        return dict(self.typed_config().options) if kind.reads_source or kind.commits_output else {}

    def config_json(self) -> dict[str, Any]:
        """The config as JSON-able data (``OperatorConfig.to_json``)."""
        config = self.typed_config()
        return config.to_json() if isinstance(config, OperatorConfig) else config

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "config": self.config_json(),
            "output_schema": schema_to_json(self.output_schema),
            "inputs": [[e.source, e.partitioning, list(e.keys), *([e.port] if e.port else [])]
                       for e in self.inputs],
            "description": self.description,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "OperatorNode":
        return cls(
            id=data["id"],
            kind=data["kind"],
            config=operator_class(data["kind"]).typed(data["config"]),
            output_schema=schema_from_json(data["output_schema"]),
            inputs=[Edge(s, p, tuple(k), *port) for s, p, k, *port in data["inputs"]],
            description=data.get("description", ""),
        )


@dataclass
class JobGraph:
    name: str
    #: Operators in topological order: every input precedes its consumer.
    nodes: list[OperatorNode] = field(default_factory=list)
    #: Job settings from SET statements and the command line ('parallelism.default', ...).
    settings: dict[str, str] = field(default_factory=dict)
    #: The Python UDFs its SQL calls, as ``engine.udfs.FunctionSpec`` JSON (each process imports them).
    functions: list[dict[str, Any]] = field(default_factory=list)

    def node(self, node_id: str) -> OperatorNode:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(node_id)

    def add(self, node: OperatorNode) -> OperatorNode:
        known = {n.id for n in self.nodes}
        if node.id in known:
            raise ValueError(f"duplicate operator id {node.id!r}")
        missing = [e.source for e in node.inputs if e.source not in known]
        if missing:
            raise ValueError(f"operator {node.id!r} reads from unknown {missing}")
        self.nodes.append(node)
        return node

    def consumers(self, node_id: str) -> list[tuple[OperatorNode, int]]:
        """(consumer, input index) pairs fed by ``node_id``."""
        return [
            (n, i) for n in self.nodes for i, e in enumerate(n.inputs) if e.source == node_id
        ]

    def source_tables(self, node_id: str) -> tuple[str, ...]:
        """The source tables whose rows flow into ``node_id``'s output, sorted."""
        tables: set[str] = set()
        pending, seen = [node_id], set()
        while pending:
            node = self.node(pending.pop())
            if node.id in seen:
                continue
            seen.add(node.id)
            if operator_class(node.kind).reads_source:
                tables.add(node.typed_config().table or node.id)
            pending.extend(e.source for e in node.inputs)
        return tuple(sorted(tables))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodes": [n.to_json() for n in self.nodes],
            "settings": dict(self.settings),
            **({"functions": list(self.functions)} if self.functions else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobGraph":
        return cls(
            name=data["name"],
            nodes=[OperatorNode.from_json(n) for n in data["nodes"]],
            settings=dict(data.get("settings", {})),
            functions=list(data.get("functions", [])),
        )

    def fingerprint(self) -> str:
        """Identifies the operators and their state layout (settings excluded)."""
        body = json.dumps([n.to_json() for n in self.nodes], sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

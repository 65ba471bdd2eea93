"""Builds a JobGraph node by node, with stable ids derived from the plan."""
from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from weir.engine.graph import Edge, JobGraph, OperatorNode
from weir.engine.operators.config import OperatorConfig
from weir.engine.operators.registry import operator_class
from weir.planner.windows import WindowSpec


@dataclass
class Stream:
    """A planned relation: the operator producing it and what its rows look like."""

    node_id: str
    schema: pa.Schema
    #: Columns that are event-time attributes (a watermark flows for them).
    time_attributes: frozenset[str]
    #: How to call it in messages: a table, view or pipeline name.
    name: str
    append_only: bool = True
    #: For an updating stream (``append_only`` False): the columns that identify a row of
    #: its result (the GROUP BY keys, a PRIMARY KEY), or None when rows have no unique key.
    #: Its batches end with ``engine.changelog.ROW_KIND``.
    upsert_key: tuple[str, ...] | None = None
    #: The columns that are bounds of a window: column -> ('window_start' | 'window_end' |
    #: 'window_time', the window). Set where a window is made (a window table function, a
    #: window aggregate, a cascaded window) and carried, as the time attributes are, through
    #: projections and renames (CTEs, views, subqueries), pass-through operators, joins (the
    #: left input's) and unions whose inputs agree (``window_bound``).
    window_columns: dict[str, tuple[str, WindowSpec]] = field(default_factory=dict)

    def window_bound(self, column: str) -> tuple[str, WindowSpec] | None:
        """('window_start' | 'window_end' | 'window_time', the window) when ``column`` is a bound
        of a window, under whatever name it has here (``window_start AS starttime``). A window
        aggregate's keys and aggregates are new columns; a source's are no bounds."""
        return self.window_columns.get(column)


@dataclass
class GraphBuilder:
    graph: JobGraph
    #: Source streams by table name, shared by every pipeline that reads the table.
    sources: dict[str, Stream] = field(default_factory=dict)
    #: The columns an aggregate's projection and HAVING see (keys, window bounds, aggregate
    #: results), by the aggregate's node id: ``planner.udfs.project_after_aggregates`` reads them.
    aggregate_scopes: dict[str, pa.Schema] = field(default_factory=dict)

    def new_id(self, pipeline: str, kind: str) -> str:
        base = f"{pipeline}.{kind}"
        taken = {n.id for n in self.graph.nodes}
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        return candidate

    def add(
        self,
        pipeline: str,
        kind: str,
        config: OperatorConfig | dict,
        schema: pa.Schema,
        inputs: list[Edge],
        description: str,
        *,
        label: str | None = None,
    ) -> OperatorNode:
        """Add an operator with id ``<pipeline>.<label or kind>`` (suffixed _2, _3, ... when taken).
        ``config`` is the kind's ``Config`` dataclass (``OperatorKind.Config``; a dict for a kind
        without one: the runtime's source and sink)."""
        expected = operator_class(kind).Config
        if expected is not None and not isinstance(config, expected):
            raise TypeError(f"a {kind} node's config is a {expected.__name__}, not {type(config).__name__}")
        node = OperatorNode(self.new_id(pipeline, label or kind), kind, config, schema, inputs, description)
        return self.graph.add(node)

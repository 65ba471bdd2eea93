"""What a feature module asks of the query planner that calls it: a Protocol.

``planner/queries.py``'s ``QueryPlanner`` dispatches a query to the features (joins,
aggregates, unions, ...), and they plan their inputs back through it. The features name it
by this Protocol, defined below them, so that no feature imports the dispatcher (not even
under ``if TYPE_CHECKING``) and the planner's import graph has no circle.
"""
from __future__ import annotations

from typing import Protocol

import pyarrow as pa
from sqlglot import exp

from weir.planner.catalog import Catalog
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope
from weir.planner.graph_builder import GraphBuilder, Stream


class QueryPlanning(Protocol):
    """The query planner of one statement (``planner.queries.QueryPlanner``)."""

    catalog: Catalog
    builder: GraphBuilder
    settings: dict[str, str]
    #: (line, column) of the statement: where a problem without a node of its own is reported.
    fallback: tuple[int, int]
    #: Common table expressions in scope (``planner.ctes``), innermost last.
    ctes: tuple

    def fail(self, message: str, node: exp.Expression | None = None, hint: str | None = None) -> PlanError:
        """A PlanError for ``message`` at ``node`` (or the statement)."""

    def plan_query(self, query: exp.Expression, pipeline: str) -> Stream:
        """Plan a query (SELECT, UNION, WITH ...) into the graph."""

    def plan_relation(self, relation: exp.Expression, pipeline: str) -> Stream:
        """Plan a relation of FROM: a table, view, CTE or subquery."""

    def plan_calc(self, select: exp.Select, stream: Stream, scope: Scope, pipeline: str) -> Stream:
        """The SELECT list and WHERE of ``select`` over ``stream`` as a calc."""

    def plan_pre_aggregate(self, stream: Stream, filter_sql: str | None, computed: list[list[str]],
                           pipeline: str, node: exp.Expression) -> Stream:
        """A calc before an aggregate: the filter, and computed keys as columns."""

    def expand_star(self, items: list[exp.Expression], scope: Scope) -> list[exp.Expression]:
        """``items`` with ``*`` replaced by the columns of ``scope``."""

    def describe_projection(self, projection: list[list[str]], filter_sql: str | None, input_schema: pa.Schema,
                            node: exp.Expression) -> pa.Schema:
        """The output schema of a projection and filter over ``input_schema``."""

    def describe(self, sql: str, input_schema: pa.Schema, node: exp.Expression) -> pa.Schema:
        """The output schema of ``sql`` over ``input_schema``; a PlanError at ``node`` if it does not bind."""

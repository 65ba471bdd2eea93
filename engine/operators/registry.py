"""Operator kinds by name, as a JobGraph's ``OperatorNode.kind`` names them.

A new operator is its own file (its class declares its traits and EXPLAIN lines:
``OperatorKind``) plus one line in ``OPERATORS`` here; everything else asks
``operator_class(kind)``. An operator's module is imported when its kind is first
looked up (``engine.lazy_registry``): a job run in one process loads the operators of its job
only; the fork server of a parallel job's workers loads them all once, before it forks any
(``runtime.worker_preload``)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weir.engine.errors import EngineError
from weir.engine.lazy_registry import LazyRegistry
from weir.engine.operators.base import Operator, OperatorContext, OperatorKind

_OPERATORS = {
    "calc": "weir.engine.operators.calc:Calc",
    "group_aggregate": "weir.engine.operators.group_aggregate:GroupAggregate",
    "window_aggregate": "weir.engine.operators.window_aggregate:WindowAggregate",
    "window_rank": "weir.engine.operators.window_rank:WindowRank",
    "window_join": "weir.engine.operators.window_join:WindowJoin",
    "window_assign": "weir.engine.operators.window_assign:WindowAssign",
    "session_window": "weir.engine.operators.session_window:SessionWindow",
    "stream_join": "weir.engine.operators.stream_join:StreamJoin",
    "limit": "weir.engine.operators.limit:Limit",
    "lookup_join": "weir.engine.operators.lookup_join:LookupJoin",
    "temporal_join": "weir.engine.operators.temporal_join:TemporalJoin",
    "top_n": "weir.engine.operators.top_n:TopN",
    "union": "weir.engine.operators.union:Union",
    "interval_join": "weir.engine.operators.interval_join:IntervalJoin",
    "over_aggregate": "weir.engine.operators.over_aggregate:OverAggregate",
    "table_function": "weir.engine.operators.table_function:TableFunctionOperator",
}

#: Operator classes by kind.
OPERATORS: Mapping[str, type[Operator]] = LazyRegistry(_OPERATORS)

#: Every kind a JobGraph node can have -> the class declaring what it is: the operators above,
#: and the runtime's reader of a source and writer of a sink.
KINDS: Mapping[str, type[OperatorKind]] = LazyRegistry({
    "source": "weir.engine.runtime.source_reader:SourceReader",
    "sink": "weir.engine.runtime.sink_writer:SinkWriter",
    **_OPERATORS,
})


def operator_class(kind: str) -> type[OperatorKind]:
    """The class that declares the traits of ``kind`` (``OperatorKind``)."""
    try:
        return KINDS[kind]
    except KeyError:
        raise EngineError(f"unknown operator kind {kind!r}", hint=f"known kinds: {', '.join(sorted(KINDS))}") from None


def build_operator(kind: str, config: dict[str, Any], ctx: OperatorContext) -> Operator:
    """Instantiate the operator class registered under ``kind``."""
    try:
        cls = OPERATORS[kind]
    except KeyError:
        raise EngineError(
            f"unknown operator kind {kind!r}",
            hint=f"known kinds: {', '.join(sorted(OPERATORS))}",
            operator_id=ctx.operator_id,
        ) from None
    return cls(config, ctx)

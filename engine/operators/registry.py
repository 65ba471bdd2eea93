"""Operator kinds by name, as a JobGraph's ``OperatorNode.kind`` names them.

A new operator is its own file (its class declares its traits and EXPLAIN lines:
``OperatorKind``) plus one line in ``OPERATORS`` here; everything else asks
``operator_class(kind)``."""
from __future__ import annotations

from typing import Any

from weir.engine.errors import EngineError
from weir.engine.operators.base import Operator, OperatorContext, OperatorKind
from weir.engine.operators.calc import Calc
from weir.engine.operators.limit import Limit
from weir.engine.operators.lookup_join import LookupJoin
from weir.engine.operators.group_aggregate import GroupAggregate
from weir.engine.operators.session_window import SessionWindow
from weir.engine.operators.stream_join import StreamJoin
from weir.engine.operators.table_function import TableFunctionOperator
from weir.engine.operators.temporal_join import TemporalJoin
from weir.engine.operators.top_n import TopN
from weir.engine.operators.window_aggregate import WindowAggregate
from weir.engine.operators.window_rank import WindowRank
from weir.engine.operators.window_join import WindowJoin
from weir.engine.operators.union import Union
from weir.engine.operators.interval_join import IntervalJoin
from weir.engine.operators.over_aggregate import OverAggregate
from weir.engine.runtime.sink_writer import SinkWriter
from weir.engine.runtime.source_reader import SourceReader

OPERATORS: dict[str, type[Operator]] = {
    "calc": Calc,
    "group_aggregate": GroupAggregate,
    "window_aggregate": WindowAggregate,
    "window_rank": WindowRank,
    "window_join": WindowJoin,
    "session_window": SessionWindow,
    "stream_join": StreamJoin,
    "limit": Limit,
    "lookup_join": LookupJoin,
    "temporal_join": TemporalJoin,
    "top_n": TopN,
    "union": Union,
    "interval_join": IntervalJoin,
    "over_aggregate": OverAggregate,
    "table_function": TableFunctionOperator,
}

#: Every kind a JobGraph node can have -> the class declaring what it is: the operators above,
#: and the runtime's reader of a source and writer of a sink.
KINDS: dict[str, type[OperatorKind]] = {"source": SourceReader, "sink": SinkWriter, **OPERATORS}


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

"""Planning GROUP BY over a SESSION window into a session_window operator.

A session window aggregate is planned like the other window aggregates
(``planner/aggregates.py``: keys, aggregate calls, HAVING and the projection,
a hash edge on the keys) and lowered to the ``session_window`` operator, whose
config has the same shape with ``{"kind": "session", "gap": µs}`` as window.

Sessions are kept per key: the GROUP BY keys besides the window bounds. In the
table function ``SESSION(TABLE t PARTITION BY k, DESCRIPTOR(ts), gap)`` the
PARTITION BY columns and the GROUP BY keys must be the same columns (a key
outside PARTITION BY would split a session that Flink keeps whole); the legacy
``GROUP BY SESSION(ts, gap), k`` keys its sessions by its GROUP BY keys.
"""
from __future__ import annotations

import dataclasses


from sqlglot import exp

from weir.planner.aggregates import plan_window_aggregate
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope, position
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.planner.windows import WINDOW_COLUMNS, WindowSpec
from weir.sql.errors import Problem
from weir.sql.statements import WindowTVF

#: The operator a session window aggregate becomes, and its EXPLAIN name.
OPERATOR = ("session_window", "SessionWindowAggregate")


def plan_session_window(qp: QueryPlanning, select: exp.Select, tvf: WindowTVF, stream: Stream,
                        window: WindowSpec, scope: Scope, pipeline: str) -> Stream:
    _check_partition_keys(qp, select, tvf, window, scope)
    # a session's bounds are not window bounds for later queries: no window join or cascaded
    # window over sessions (their windows have no size to tumble by)
    aggregated = plan_window_aggregate(qp, select, stream, window, scope, pipeline, OPERATOR)
    return dataclasses.replace(aggregated, window_columns={})


def _check_partition_keys(qp: QueryPlanning, select: exp.Select, tvf: WindowTVF, window: WindowSpec,
                          scope: Scope) -> None:
    """PARTITION BY columns and GROUP BY keys are the same columns; every problem at once."""
    partition = tvf.args.get("partition_by") or []
    if not partition:
        return
    group = select.args.get("group")
    keys: dict[str, exp.Expression] = {}
    for item in group.expressions if group else []:
        if isinstance(item, exp.Column) and item.name in WINDOW_COLUMNS:
            continue
        name = scope.resolve(item.name) if isinstance(item, exp.Column) else None
        keys[(name or item.sql()).lower()] = item
    problems: list[Problem] = []
    partitioned = set()
    for column in partition:
        name = scope.resolve(column.name)
        if name is None:
            problems.append(scope.unknown_column(column))
            continue
        partitioned.add(name.lower())
        if name.lower() not in keys:
            problems.append(Problem(
                f"SESSION is partitioned by `{name}`, which is not a GROUP BY key",
                *position(column, qp.fallback),
                f"add `{name}` to GROUP BY: GROUP BY {', '.join([name, *(k.sql() for k in keys.values())])}, "
                "window_start, window_end",
            ))
    for name, item in keys.items():
        if name not in partitioned:
            problems.append(Problem(
                f"GROUP BY key {item.sql()} is not in SESSION's PARTITION BY: sessions are formed per "
                "PARTITION BY key, and a further key would split them",
                *position(item, qp.fallback),
                f"partition the sessions by it too: SESSION(TABLE ... PARTITION BY "
                f"{', '.join([*window.partition_by, item.sql()])}, ...), or drop it from GROUP BY",
            ))
    if problems:
        raise PlanError(problems)

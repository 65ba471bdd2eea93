"""GROUP BY the window bounds of a windowed input: a window aggregate again, not an updating one.

Flink keeps the window properties of a window aggregate's output through
projections and renames (``window_start AS starttime``); a later ``GROUP BY
starttime, endtime`` over it is a window aggregate of the same windows (an
append-only result, each window's row emitted once when it fires), and a join
on them a window join. Nexmark q5 groups the bid counts of each HOP window by
the window to find their maximum, then joins the counts with it.

Here ``Stream.window_bound`` (``planner/graph_builder.py``) finds the two GROUP BY columns
that are the ``window_start`` and ``window_end`` of one TUMBLE, HOP or
CUMULATE window of the input. Such a window is identified by its end: the ends
of its windows lie ``w`` apart (the size, slide or step), one window per end.
So the plan is:

1. a ``calc`` renames the two bound columns (and any input column called
   ``window_start``, ``window_end`` or ``window_time``) to internal names and
   adds ``_window_time = end - 1 ms``, the input window's own window_time;
2. a window aggregate with ``TUMBLE(_window_time, w, offset)`` (the windows
   ``[end - w, end)``, one per input window) that groups by the two bound
   columns as keys too, so its output carries the input's bounds unchanged;
3. its output columns for them (and for the input's window_time, if grouped)
   are the bounds of the input's window in the output stream
   (``Stream.window_columns``), for window joins and further cascades; a
   window_time stays a time attribute.

An input row is the result of a window that fired when the watermark reached
its window_time, so it is never late for the tumbling window holding it.
"""
from __future__ import annotations

import dataclasses

import pyarrow as pa
from sqlglot import exp

from weir.engine.graph import Edge
from weir.engine.operators.calc import CalcConfig
from weir.planner.aggregates import plan_window_aggregate
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope, output_name, quote
from weir.planner.graph_builder import Stream
from weir.planner.grouping_sets import CONSTRUCTS
from weir.planner.planning import QueryPlanning
from weir.planner.windows import WINDOW_COLUMNS, WINDOW_TIME_OFFSET_US, WindowSpec, same_window, window_fields

#: The internal names of the input's window bounds and its window_time.
START, END, TIME = "_window_start", "_window_end", "_window_time"
#: The width between two window ends, per window kind.
_END_SPACING = {"tumble": "size", "hop": "slide", "cumulate": "step"}


def _grouped_bounds(qp: QueryPlanning, select: exp.Select, stream: Stream,
                    scope: Scope) -> tuple[str, str, WindowSpec] | None:
    """(start column, end column, their window) when the GROUP BY names both bounds of one window
    of the input as plain columns; None otherwise (then it is a GROUP BY without a window)."""
    group = select.args.get("group")
    if group is None or not stream.append_only or any(isinstance(e, CONSTRUCTS) for e in group.expressions):
        return None
    found: dict[str, tuple[str, WindowSpec]] = {}
    for item in group.expressions:
        declared = scope.resolve(item.name) if isinstance(item, exp.Column) else None
        role = stream.window_bound(declared) if declared else None
        if role is not None and role[0] in ("window_start", "window_end"):
            found.setdefault(role[0], (declared, role[1]))
    if len(found) < 2:
        return None
    (start, window), (end, other) = found["window_start"], found["window_end"]
    if not same_window(window, other) or window.kind not in _END_SPACING:
        return None
    if getattr(window, _END_SPACING[window.kind]) < WINDOW_TIME_OFFSET_US:
        return None  # ends closer than window_time's 1 ms lag would share a tumbling window
    return start, end, window


def plan_cascaded_window(qp: QueryPlanning, select: exp.Select, stream: Stream, scope: Scope,
                         pipeline: str) -> Stream | None:
    """The window aggregate of a SELECT whose GROUP BY holds the window bounds of its input,
    or None when it holds no such pair."""
    bounds = _grouped_bounds(qp, select, stream, scope)
    if bounds is None:
        return None
    start, end, window = bounds
    clauses = [*select.expressions, *(select.args.get(k) for k in ("where", "having", "group"))]
    for column in (c for clause in clauses if clause is not None for c in clause.find_all(exp.Column)):
        if column.name.lower() in WINDOW_COLUMNS and scope.resolve(column.name) is None:
            raise PlanError(scope.unknown_column(column))
    renamed = {start: START, end: END}
    renamed.update({name: f"_input_{name}" for name in stream.schema.names
                    if name.lower() in WINDOW_COLUMNS and name not in renamed})
    projection = [[renamed.get(name, name), quote(name)] for name in stream.schema.names]
    projection.append([TIME, f"{quote(end)} - INTERVAL {WINDOW_TIME_OFFSET_US} MICROSECOND"])
    schema = pa.schema([*(f.with_name(renamed.get(f.name, f.name)) for f in stream.schema),
                        pa.field(TIME, stream.schema.field(end).type)])
    node = qp.builder.add(pipeline, "calc", CalcConfig(projection=projection), schema,
                          [Edge(stream.node_id)], f"Calc(select=[{', '.join(_described(projection))}])")
    windowed = Stream(node.id, schema, frozenset([TIME]), stream.name)
    spacing = getattr(window, _END_SPACING[window.kind])
    tumble = WindowSpec("tumble", TIME, size=spacing, offset=window.offset)
    rewritten = _rewrite(qp, select, scope, renamed)
    inner_scope = Scope(pa.schema([*schema, *window_fields()]), stream.name, qp.fallback)
    aggregated = plan_window_aggregate(qp, rewritten, windowed, tumble, inner_scope, pipeline)
    made = _input_bounds(rewritten, stream, renamed, window)
    kept_times = {name for name, (bound, _) in made.items() if bound == "window_time"}
    return dataclasses.replace(aggregated, time_attributes=aggregated.time_attributes | kept_times,
                               window_columns=made)


def _input_bounds(rewritten: exp.Select, stream: Stream, renamed: dict[str, str],
                  window: WindowSpec) -> dict[str, tuple[str, WindowSpec]]:
    """The output columns that are bounds of the input's window: the items of the rewritten SELECT
    that are its two bound columns, the new tumbling window's window_time (the input window's
    end - 1 ms) and the input's window_time columns (grouped as keys)."""
    internal = {START: "window_start", END: "window_end", "window_time": "window_time"}
    internal.update({renamed.get(name, name): "window_time" for name in stream.schema.names
                     if (stream.window_bound(name) or ("",))[0] == "window_time"})
    out = {}
    for item in rewritten.expressions:
        body = item.unalias()
        if isinstance(body, exp.Column) and body.name in internal:
            out[item.alias_or_name] = (internal[body.name], window)
    return out


def _rewrite(qp: QueryPlanning, select: exp.Select, scope: Scope, renamed: dict[str, str]) -> exp.Select:
    """The SELECT over the renamed columns, each item keeping its output name, grouped by the
    tumbling window too."""
    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            declared = scope.resolve(node.name)
            if declared in renamed:
                return exp.column(renamed[declared], quoted=True)
        return node

    out = select.copy()
    items = []
    for index, item in enumerate(qp.expand_star(select.expressions, scope)):
        name = output_name(item, index)
        body = item.unalias() if isinstance(item, exp.Alias) else item
        items.append(exp.alias_(body.copy().transform(rename), name, quoted=True))
    out.set("expressions", items)
    for key in ("where", "having"):
        if out.args.get(key) is not None:
            out.set(key, out.args[key].transform(rename))
    group = [e.transform(rename) for e in out.args["group"].expressions]
    out.set("group", exp.Group(expressions=[*group, exp.column("window_start"), exp.column("window_end")]))
    return out


def _described(projection: list[list[str]]) -> list[str]:
    return [name if sql == quote(name) else f"{name}={sql}" for name, sql in projection]

"""Planning OVER aggregates: aggregates over a frame of preceding rows ordered by event time.

Flink's OVER aggregation::

    SELECT *, SUM(amount) OVER (PARTITION BY customer ORDER BY order_time
                                ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) AS last_11
    FROM orders

Frames: ``ROWS BETWEEN n PRECEDING AND CURRENT ROW``, ``RANGE BETWEEN INTERVAL
... PRECEDING AND CURRENT ROW`` and ``[ROWS | RANGE] BETWEEN UNBOUNDED
PRECEDING AND CURRENT ROW`` (the default with ORDER BY, as RANGE); ``ROWS n
PRECEDING`` is short for the first. ORDER BY must be one time attribute,
ascending. Several aggregates (COUNT, SUM, MIN, MAX, AVG, with FILTER) may
appear, also inside expressions and through ``WINDOW w AS (...)``, but they
must all use the same window, as in Flink. WHERE filters rows before.
Python aggregate functions (``CREATE FUNCTION ... LANGUAGE PYTHON`` of a UDAF) may appear beside
them, without FILTER; a bounded frame (ROWS n, RANGE interval) needs the function's ``retract``.

Plan: WHERE, computed partition keys and aggregate arguments become a ``calc``;
an ``over_aggregate`` node on a hash edge by the partition keys adds one
column per aggregate (``_over0``, ...); the projection is a ``calc`` over it.
Its output is append-only: a row comes out once, when the watermark passes
its time. ``ROW_NUMBER``/``RANK`` stay with ``planner/ranking.py`` (Top-N).
"""
from __future__ import annotations


import pyarrow as pa
from sqlglot import exp

from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.engine.operators.accumulators import FUNCTIONS
from weir.engine.sql_eval import INPUT
from weir.planner.errors import PlanError
from weir.planner.aggregate_calls import PythonAggregateCall, typed
from weir.planner.expressions import AGGREGATES, Scope, bind, quote, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.planner.windows import format_duration
from weir.sql.dialect import Weir
from weir.sql.errors import Problem, WeirSqlError
from weir.sql.intervals import interval_micros
from weir.sql.statements import WindowTVF

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
over_aggregate = LazyModule("weir.engine.operators.over_aggregate")

EXAMPLE = ("SUM(amount) OVER (PARTITION BY customer ORDER BY order_time "
           "ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)")


def _aggregate_of(window: exp.Window) -> exp.Expression:
    call = window.this
    return call.this if isinstance(call, exp.Filter) else call


def _is_over_aggregate(window: exp.Window) -> bool:
    call = _aggregate_of(window)
    return type(call) in AGGREGATES or isinstance(call, PythonAggregateCall)


def _windows(select: exp.Select) -> list[exp.Window]:
    return [w for item in select.expressions for w in item.find_all(exp.Window)]


def is_over_aggregate(select: exp.Select) -> bool:
    """True when a select item aggregates OVER a window (not ROW_NUMBER and friends)."""
    return any(_is_over_aggregate(w) for w in _windows(select))


def ranks_below(select: exp.Select) -> bool:
    """False when the only window functions the ranking planner would see are OVER aggregates
    (a query over a subquery computing them is an ordinary query)."""
    windows = _windows(select)
    from_ = select.args.get("from_")
    relation = from_.this if from_ is not None else None
    if isinstance(relation, exp.Subquery) and isinstance(relation.this, exp.Select):
        windows += _windows(relation.this)
    return not windows or any(not _is_over_aggregate(w) for w in windows)


class _OverPlanner:
    def __init__(self, qp: QueryPlanning, select: exp.Select):
        self.qp, self.select = qp, select
        self.problems: list[Problem] = []

    def problem(self, message: str, node: exp.Expression | None, hint: str | None = None) -> None:
        self.problems.append(self.qp.fail(message, node, hint).problems[0])

    def definition(self, window: exp.Window) -> exp.Window:
        """The window's PARTITION BY, ORDER BY and frame: its own, or those of ``WINDOW name AS (...)``."""
        alias = window.args.get("alias")
        own = any(window.args.get(k) for k in ("partition_by", "order", "spec"))
        if alias is None or own:
            return window
        for named in self.select.args.get("windows") or []:
            if named.this.name.lower() == alias.name.lower():
                return named
        raise self.qp.fail(f"unknown window `{alias.name}`", window,
                           f"define it: WINDOW {alias.name} AS (PARTITION BY ... ORDER BY ...)")

    def frame(self, spec: exp.WindowSpec | None, node: exp.Expression) -> dict:
        if spec is None:
            return {"kind": "unbounded", "mode": "range"}
        kind = (spec.args.get("kind") or "").upper()
        start, side = spec.args.get("start"), (spec.args.get("start_side") or "").upper()
        end = spec.args.get("end")
        if (isinstance(end, str) and end.upper() != "CURRENT ROW") or (end is not None and not isinstance(end, str)):
            self.problem("an OVER frame must end at CURRENT ROW", spec,
                         "a row is emitted when the watermark passes it; FOLLOWING rows have not arrived yet: "
                         + EXAMPLE)
            return {}
        if isinstance(start, str) and start.upper() == "UNBOUNDED" and side == "PRECEDING":
            return {"kind": "unbounded", "mode": kind.lower()}
        if isinstance(start, str) and start.upper() == "CURRENT ROW":
            return {"kind": "rows", "preceding": 0} if kind == "ROWS" else {"kind": "range", "preceding": 0}
        if side != "PRECEDING":
            self.problem("an OVER frame must start PRECEDING the current row", spec, EXAMPLE)
            return {}
        if kind == "ROWS":
            if isinstance(start, exp.Literal) and not start.is_string and start.this.isdigit():
                return {"kind": "rows", "preceding": int(start.this)}
            self.problem(f"ROWS frame bound `{start.sql()}` is not a number of rows", start,
                         "ROWS BETWEEN 10 PRECEDING AND CURRENT ROW; for a time span use RANGE BETWEEN "
                         "INTERVAL '1' HOUR PRECEDING AND CURRENT ROW")
            return {}
        if isinstance(start, exp.Interval):
            try:
                return {"kind": "range", "preceding": interval_micros(start)}
            except WeirSqlError as error:
                self.problems.extend(error.problems)
                return {}
        self.problem(f"RANGE frame bound `{start.sql() if isinstance(start, exp.Expression) else start}` is not "
                     "an interval", start if isinstance(start, exp.Expression) else spec,
                     "the frame orders by event time: RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW")
        return {}

    def order(self, definition: exp.Window, stream: Stream, scope: Scope, node: exp.Expression) -> str | None:
        order = definition.args.get("order")
        items = order.expressions if order is not None else []
        times = ", ".join(f"`{t}`" for t in sorted(stream.time_attributes)) or "none"
        if len(items) != 1:
            self.problem("an OVER aggregate must be ordered by exactly one time attribute", order or node,
                         f"ORDER BY a column with a watermark ({times}), e.g. {EXAMPLE}")
            return None
        item = items[0]
        bound = bind(item.this, scope, self.problems)
        if not isinstance(bound, exp.Column) or bound.name not in stream.time_attributes:
            self.problem(f"an OVER aggregate must be ordered by a time attribute, not `{item.this.sql()}`",
                         item, f"order by the event time, a column with a watermark: {times}")
            return None
        if item.args.get("desc"):
            self.problem("an OVER aggregate must be ordered by its time attribute ascending", item,
                         f"ORDER BY {bound.name} (ASC): rows are aggregated in event-time order")
            return None
        return bound.name


    def python_call(self, call: PythonAggregateCall, condition: exp.Expression | None, frame: dict,
                    scope: Scope, stream: Stream, computed: list[list[str]], name: str) -> dict | None:
        """A call of a Python aggregate function OVER the window: its argument a column (several:
        a struct a0, a1, ... computed before), its spec; refused without ``retract`` in a bounded frame."""
        function = self.qp.catalog.functions[call.this.lower()].function
        arguments = list(call.expressions)
        label = f"{call.this}({', '.join(a.sql(dialect=Weir) for a in arguments)})"
        if condition is not None:
            self.problem(f"FILTER on the Python aggregate function {call.this} OVER a window is not supported",
                         call, "filter the rows with WHERE, or pass the argument as CASE WHEN ... THEN v END "
                               "and skip NULLs in the function")
            return None
        if any(isinstance(a, (exp.Distinct, exp.Star)) for a in arguments):
            self.problem(f"{label}: a Python aggregate function OVER a window takes columns or expressions", call,
                         f"call it with no argument, {call.this}(), to aggregate rows")
            return None
        if frame and frame["kind"] != "unbounded" and not function.retracts:
            self.problem(f"the Python aggregate function {call.this} has no retract method, which a bounded "
                         "OVER frame needs (each row leaving the frame is retracted)", call,
                         over_aggregate.RETRACT_HINT)
        bound = [bind(a, scope, self.problems) for a in arguments]
        if len(bound) == 1 and isinstance(bound[0], exp.Column):
            argument = bound[0].name
        elif not bound:
            argument = None
        else:
            argument = f"_arg{name[len('_over'):]}"
            sqls = [to_duckdb(b, stream.schema) for b in bound]
            computed.append([argument, sqls[0] if len(sqls) == 1 else
                             "{" + ", ".join(f"'a{i}': {sql}" for i, sql in enumerate(sqls)) + "}"])
        spec = function.spec(call.this.lower(), arity=len(bound))
        return {"name": name, "function": spec.name, "argument": argument, "label": label,
                "result_type": spec.result_type, "python": spec}

    def aggregates(self, windows: list[exp.Window], scope: Scope, stream: Stream,
                   computed: list[list[str]], frame: dict) -> tuple[list[dict], dict[str, str], list[str]]:
        """The distinct aggregate calls (``_over0``, ...), each window's SQL -> its name, and their
        EXPLAIN text; arguments that are expressions are added to ``computed``."""
        aggregates: list[dict] = []
        names: dict[str, str] = {}
        described: list[str] = []
        for window in windows:
            call = _aggregate_of(window)
            condition = window.this.expression.this if isinstance(window.this, exp.Filter) else None
            if isinstance(call, PythonAggregateCall):
                text = window.sql()
                if text in names:
                    continue
                python = self.python_call(call, condition, frame, scope, stream, computed, f"_over{len(aggregates)}")
                if python is not None:
                    names[text] = python["name"]
                    aggregates.append(python)
                    described.append(f"{python['name']}={python['function']}({python['argument'] or ''}) [Python]")
                continue
            argument = call.this
            if isinstance(argument, exp.Distinct):
                self.problem(f"{call.sql_name()}(DISTINCT ...) OVER is not supported", call,
                             "aggregate distinct values in a window aggregate instead")
                continue
            if isinstance(argument, exp.Star):
                argument = None
            if condition is not None:  # FILTER (WHERE c): only the rows where c holds count
                argument = exp.Case(ifs=[exp.If(this=condition.copy(),
                                                true=(argument or exp.Literal.number(1)).copy())])
            text = window.sql()
            if text in names:
                continue
            name = f"_over{len(aggregates)}"
            names[text] = name
            arg_name = None
            if argument is not None:
                bound = bind(argument, scope, self.problems)
                if isinstance(bound, exp.Column):
                    arg_name = bound.name
                else:
                    arg_name = f"_arg{len(aggregates)}"
                    computed.append([arg_name, to_duckdb(bound, stream.schema)])
            function = AGGREGATES[type(call)]
            aggregates.append({"name": name, "function": function, "argument": arg_name,
                               "label": call.sql(dialect=Weir)})
            described.append(f"{name}={function}({arg_name or '*'})")
        return aggregates, names, described


def plan_over_aggregate(qp: QueryPlanning, select: exp.Select, pipeline: str) -> Stream:
    for unsupported, what in (("group", "GROUP BY"), ("having", "HAVING"), ("order", "ORDER BY"),
                              ("limit", "LIMIT"), ("distinct", "DISTINCT"), ("joins", "JOIN")):
        if node := select.args.get(unsupported):
            hint = ("join in a subquery and compute the OVER aggregate over it" if unsupported == "joins"
                    else "compute the OVER aggregate in a subquery")
            raise qp.fail(f"{what} with an OVER aggregate in the same SELECT is not supported",
                          node[0] if isinstance(node, list) else node, hint)
    windows = _windows(select)
    ranking = [w for w in windows if not _is_over_aggregate(w)]
    if ranking:
        raise qp.fail(f"{ranking[0].this.sql()} OVER (...) cannot be mixed with OVER aggregates in one SELECT",
                      ranking[0], "rank in a subquery of its own (window Top-N)")
    from_ = select.args.get("from_")
    if from_ is None:
        raise qp.fail("a streaming query needs FROM", select)
    relation = from_.this
    if isinstance(relation, WindowTVF):
        stream = qp.plan_query(exp.select("*").from_(relation.copy()), pipeline)
    else:
        stream = qp.plan_relation(relation, pipeline)
    if not stream.append_only:
        raise qp.fail(f"an OVER aggregate over an updating stream (the result of `{stream.name}`) is not "
                      "supported; a row already emitted could not be taken back", select,
                      "compute the OVER aggregate over the append-only input")
    scope = Scope(stream.schema, stream.name, qp.fallback)
    planner = _OverPlanner(qp, select)

    # one window for all the aggregates
    definitions = [planner.definition(w) for w in windows]
    first = definitions[0]
    shape = lambda d: (tuple(p.sql() for p in d.args.get("partition_by") or []),  # noqa: E731
                       d.args["order"].sql() if d.args.get("order") else "",
                       d.args["spec"].sql() if d.args.get("spec") else "")
    for window, definition in zip(windows, definitions):
        if shape(definition) != shape(first):
            raise qp.fail("all OVER aggregates of a SELECT must use the same window", window,
                          "give them the same PARTITION BY, ORDER BY and frame (a WINDOW w AS (...) clause helps), "
                          "or compute the others in a subquery")
    time_column = planner.order(first, stream, scope, windows[0])
    frame = planner.frame(first.args.get("spec"), windows[0])

    computed: list[list[str]] = []
    keys = []
    for item in first.args.get("partition_by") or []:
        bound = bind(item, scope, planner.problems)
        if isinstance(bound, exp.Column):
            keys.append(bound.name)
        else:
            name = f"_pkey{len(computed)}"
            computed.append([name, to_duckdb(bound, stream.schema)])
            keys.append(name)

    aggregates, names, described = planner.aggregates(windows, scope, stream, computed, frame)

    where = select.args.get("where")
    filter_sql = to_duckdb(bind(where.this, scope, planner.problems), stream.schema) if where is not None else None
    if planner.problems or time_column is None or not frame:
        raise PlanError(planner.problems or [qp.fail("this OVER window is not supported", windows[0]).problems[0]])

    visible = list(stream.schema.names)
    if computed or filter_sql:
        stream = qp.plan_pre_aggregate(stream, filter_sql, computed, pipeline, select)
    fields = list(stream.schema)
    for agg in aggregates:
        if agg.get("python") is not None:  # get_value's result type
            fields.append(qp.describe(f"SELECT CAST(NULL AS {agg['result_type']}) AS {quote(agg['name'])} "
                                      f"FROM {INPUT}", stream.schema, select).field(0).with_name(agg["name"]))
            continue
        arg = quote(agg["argument"]) if agg["argument"] else "*"
        argument_type = stream.schema.field(agg["argument"]).type if agg["argument"] else None
        kind = FUNCTIONS[agg["function"]].result_type(argument_type)  # Flink's, as in every aggregate
        if kind is not None:
            agg["result_type"] = kind
        sql = typed(f"{agg['function']}({arg}) OVER ()", agg.get("result_type"))
        fields.append(qp.describe(f"SELECT {sql} AS {quote(agg['name'])} FROM {INPUT}", stream.schema,
                                  select).field(0).with_name(agg["name"]))
    schema = pa.schema(fields)
    config = over_aggregate.OverAggregateConfig(
        columns=stream.schema.names, partition_keys=keys, time_column=time_column,
        frame=over_aggregate.OverFrame(**frame), aggregates=[over_aggregate.OverCall(**a) for a in aggregates])
    description = (f"OverAggregate(partitionBy=[{', '.join(keys)}], orderBy=[{time_column} ASC], "
                   f"frame=[{_frame_text(frame)}], aggregates=[{', '.join(described)}])")
    edge = Edge(stream.node_id, "hash", tuple(keys)) if keys else Edge(stream.node_id)
    node = qp.builder.add(pipeline, "over_aggregate", config, schema, [edge], description)
    over = Stream(node.id, schema, stream.time_attributes, stream.name, window_columns=stream.window_columns)

    return _project(qp, select, over, visible, names, pipeline)


def _project(qp: QueryPlanning, select: exp.Select, over: Stream, visible: list[str], names: dict[str, str],
             pipeline: str) -> Stream:
    """The SELECT's projection over the aggregated rows: each OVER call becomes its column;
    ``*`` is the input's columns (not the computed keys and arguments)."""
    outer = select.copy()
    outer.set("where", None)
    outer.set("windows", None)
    items = []
    for index, item in enumerate(outer.expressions):
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            items.extend(exp.column(n, quoted=True) for n in visible)
            continue
        named = isinstance(item, (exp.Alias, exp.Column))
        item = item.transform(lambda n: exp.column(names[n.sql()], quoted=True) if isinstance(n, exp.Window) else n)
        items.append(item if named else exp.alias_(item, f"EXPR${index}", quoted=True))
    outer.set("expressions", items)
    return qp.plan_calc(outer, over, Scope(over.schema, over.name, qp.fallback), pipeline)


def _frame_text(frame: dict) -> str:
    if frame["kind"] == "rows":
        return f"ROWS BETWEEN {frame['preceding']} PRECEDING AND CURRENT ROW"
    if frame["kind"] == "range":
        span = format_duration(frame["preceding"]) if frame["preceding"] else "0"
        return f"RANGE BETWEEN {span} PRECEDING AND CURRENT ROW"
    return f"{frame['mode'].upper()} BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"

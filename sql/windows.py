"""Every window spelling, normalised to one ``WindowTVF`` in FROM.

- Flink's table function ``FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))``,
  with positional or named arguments (``DATA =>``, ``TIMECOL =>``, ``SIZE =>``...);
- RisingWave's short form ``FROM TUMBLE(t, ts, size)``;
- Flink's legacy group window ``... FROM t GROUP BY TUMBLE(ts, size), k``, whose
  ``TUMBLE_START(ts, size)``, ``TUMBLE_END`` and ``TUMBLE_ROWTIME`` become the
  columns ``window_start``, ``window_end`` and ``window_time``, and whose window in
  GROUP BY becomes ``window_start, window_end``.

The same holds for HOP, CUMULATE (table function only) and SESSION.
"""
from __future__ import annotations

from sqlglot import exp

from weir.sql.dialect import WINDOW_PARAMETERS, Descriptor, TableArgument, WindowCall
from weir.sql.errors import WeirSqlError
from weir.sql.intervals import INTERVAL_HINT, interval_micros
from weir.sql.positions import error_at
from weir.sql.statements import WindowTVF

#: The argument names of each window table function, in positional order.
ARGUMENT_NAMES = {kind: ("DATA", "TIMECOL", *(p.upper() for p in params)) for kind, params in WINDOW_PARAMETERS.items()}
OPTIONAL_ARGUMENTS = {"OFFSET"}
#: The arguments of Flink's legacy group windows: GROUP BY TUMBLE(ts, size), HOP(ts, slide, size), SESSION(ts, gap).
LEGACY_ARGUMENT_NAMES = {
    kind: tuple(name for name in ARGUMENT_NAMES[kind][1:] if name not in OPTIONAL_ARGUMENTS)
    for kind in ("TUMBLE", "HOP", "SESSION")
}

#: Legacy group window functions and the window columns that replace them.
AUXILIARY_COLUMNS = {
    f"{kind}_{suffix}": column
    for kind in ("TUMBLE", "HOP", "SESSION")
    for suffix, column in (("START", "window_start"), ("END", "window_end"), ("ROWTIME", "window_time"))
}

EXAMPLE_INTERVALS = {
    "size": "INTERVAL '1' MINUTE",
    "slide": "INTERVAL '10' SECOND",
    "step": "INTERVAL '10' SECOND",
    "gap": "INTERVAL '5' MINUTE",
}


def normalise_windows(tree: exp.Expr) -> exp.Expr:
    """Rewrite every SELECT in ``tree`` (subqueries, CTEs, INSERT/VIEW bodies) in place."""
    for select in list(tree.find_all(exp.Select)):
        _normalise_relations(select)
        _normalise_group_window(select)
    _reject_stray_window_syntax(tree)
    return tree


def window_tvf(call: WindowCall, alias: exp.TableAlias | None = None) -> WindowTVF:
    """The WindowTVF for a window table function call in FROM (Flink's or RisingWave's spelling)."""
    kind = call.name
    arguments = _bind_arguments(call, ARGUMENT_NAMES[kind])
    data = arguments["DATA"]
    partition_by = data.args.get("partition_by") if isinstance(data, TableArgument) else None
    if partition_by and kind != "SESSION":
        raise error_at(
            partition_by[0],
            f"{kind} does not take PARTITION BY; only SESSION windows are partitioned",
            f"drop PARTITION BY: the window's keys come from GROUP BY, e.g. {example(kind, call)}",
        )
    return WindowTVF(
        this=_relation(data, call),
        kind=kind,
        time_col=_time_column(arguments["TIMECOL"], call),
        partition_by=partition_by,
        alias=alias,
        **_intervals(arguments, call),
    )


def example(kind: str, call: WindowCall | None = None) -> str:
    """A correct Flink spelling of the window, using the call's table and time column where known."""
    table, time_col = "t", "ts"
    if call is not None:
        given = [a.expression if isinstance(a, exp.Kwarg) else a for a in call.expressions]
        relations = [a.this for a in given if isinstance(a, TableArgument) and isinstance(a.this, exp.Table)]
        descriptors = [a.expressions[0] for a in given if isinstance(a, Descriptor) and a.expressions]
        table = relations[0].sql() if relations else table
        time_col = descriptors[0].sql() if descriptors else time_col
    partition = " PARTITION BY k" if kind == "SESSION" else ""
    sizes = [EXAMPLE_INTERVALS[p] for p in WINDOW_PARAMETERS[kind] if p != "offset"]
    return f"TABLE({kind}(TABLE {table}{partition}, DESCRIPTOR({time_col}), {', '.join(sizes)}))"


# -- arguments ----------------------------------------------------------------------------


def _bind_arguments(call: WindowCall, names: tuple[str, ...]) -> dict[str, exp.Expr]:
    """Positional and named arguments, by name; every error says which argument and how to fix it."""
    kind = call.name
    bound: dict[str, exp.Expr] = {}
    named = False
    for index, argument in enumerate(call.expressions):
        if isinstance(argument, exp.Kwarg):
            name, value, named = argument.this.name.upper(), argument.expression, True
            if name not in names:
                raise error_at(
                    argument,
                    f"{kind} has no argument named {name}",
                    f"{kind} takes {', '.join(names)}; e.g. {example(kind, call)}",
                )
        elif named:
            raise error_at(argument, f"a positional argument of {kind} follows a named one", "name every argument after the first named one")
        elif index >= len(names):
            raise error_at(argument, f"{kind} takes at most {len(names)} arguments ({', '.join(names)})", f"e.g. {example(kind, call)}")
        else:
            name, value = names[index], argument
        if name in bound:
            raise error_at(argument, f"{kind} is given {name} twice", f"give each of {', '.join(names)} once")
        bound[name] = value
    for name in names:
        if name not in bound and name not in OPTIONAL_ARGUMENTS:
            raise error_at(call, f"{kind} needs {_describe(name)}", example(kind, call))
    return bound


def _describe(name: str) -> str:
    return {"DATA": "its input table", "TIMECOL": "a time column"}.get(name, f"a {name.lower()}")


def _relation(data: exp.Expr, call: WindowCall) -> exp.Expr:
    if isinstance(data, TableArgument):
        return data.this
    if isinstance(data, exp.Column):  # RisingWave's TUMBLE(bids, ...)
        table = exp.Table(this=data.this, db=data.args.get("table"), catalog=data.args.get("db"))
        return table.update_positions(data.this)
    raise error_at(data, f"the first argument of {call.name} must be a table, got {data.sql()}", example(call.name, call))


def _time_column(time_col: exp.Expr, call: WindowCall) -> exp.Column:
    if isinstance(time_col, Descriptor):
        if len(time_col.expressions) != 1:
            named = ", ".join(e.sql() for e in time_col.expressions) or "nothing"
            raise error_at(
                time_col,
                f"DESCRIPTOR must name exactly one time column, got {named}",
                f"name the event-time column, e.g. {example(call.name, call)}",
            )
        time_col = time_col.expressions[0]
    if not isinstance(time_col, exp.Column):
        raise error_at(time_col, f"the time column of {call.name} must be a column, got {time_col.sql()}", example(call.name, call))
    return time_col


def _intervals(arguments: dict[str, exp.Expr], call: WindowCall) -> dict[str, exp.Interval]:
    intervals = {}
    for parameter in WINDOW_PARAMETERS[call.name]:
        value = arguments.get(parameter.upper())
        if value is None:
            continue
        if not isinstance(value, exp.Interval):
            raise error_at(value, f"the {parameter} of {call.name} must be an interval, got {value.sql()}", INTERVAL_HINT)
        if interval_micros(value) <= 0 and parameter != "offset":
            raise error_at(value, f"the {parameter} of {call.name} must be positive, got {value.sql()}", INTERVAL_HINT)
        intervals[parameter] = value
    return intervals


# -- the three spellings ------------------------------------------------------------------


def _normalise_relations(select: exp.Select) -> None:
    """FROM/JOIN relations that are window calls become WindowTVFs, keeping their alias."""
    relations = [select.args.get("from_")] + list(select.args.get("joins") or [])
    for holder in filter(None, relations):
        relation = holder.this
        call = relation.this if isinstance(relation, exp.Table) else relation
        if isinstance(call, WindowCall):
            relation.replace(window_tvf(call, alias=relation.args.get("alias")))


def _normalise_group_window(select: exp.Select) -> None:
    """Legacy ``GROUP BY TUMBLE(ts, size)``: the window moves to FROM."""
    group = select.args.get("group")
    calls = [e for e in (group.expressions if group else []) if isinstance(e, WindowCall)]
    auxiliaries = [
        f for f in select.find_all(exp.Anonymous) if f.name.upper() in AUXILIARY_COLUMNS and f.parent_select is select
    ]
    if not calls:
        if auxiliaries:
            raise _auxiliary_without_window(auxiliaries[0])
        return
    if len(calls) > 1:
        raise error_at(calls[1], "GROUP BY can hold one window", "group by a single TUMBLE, HOP or SESSION window")
    call = calls[0]
    tvf = _group_window_tvf(select, call)
    for function in auxiliaries:
        _check_auxiliary(function, call)
        function.replace(exp.column(AUXILIARY_COLUMNS[function.name.upper()]))
    position = next(i for i, e in enumerate(group.expressions) if e is call)
    bounds = [exp.column("window_start"), exp.column("window_end")]
    group.set("expressions", group.expressions[:position] + bounds + group.expressions[position + 1 :])
    select.args["from_"].set("this", tvf)


def _group_window_tvf(select: exp.Select, call: WindowCall) -> WindowTVF:
    kind = call.name
    table_function_syntax = any(isinstance(a, (TableArgument, Descriptor, exp.Kwarg)) for a in call.expressions)
    if call.args.get("wrapped") or kind not in LEGACY_ARGUMENT_NAMES or table_function_syntax:
        raise error_at(
            call,
            f"a {kind} table function belongs in FROM, not GROUP BY",
            f"FROM {example(kind, call)} GROUP BY window_start, window_end",
        )
    from_ = select.args.get("from_")
    if from_ is None or select.args.get("joins") or isinstance(from_.this, WindowTVF):
        raise error_at(
            call,
            f"GROUP BY {kind}(...) needs a single table in FROM",
            f"window the input with FROM {example(kind)} instead",
        )
    arguments = _bind_arguments(call, LEGACY_ARGUMENT_NAMES[kind])
    relation = from_.this.pop()  # moved, not copied: the SELECTs inside it are still to normalise
    alias = relation.args.get("alias")
    relation.set("alias", None)
    return WindowTVF(
        this=relation,
        kind=kind,
        time_col=_time_column(arguments["TIMECOL"], call).copy(),
        alias=alias,
        **{name: value.copy() for name, value in _intervals(arguments, call).items()},
    )


def _auxiliary_without_window(function: exp.Anonymous) -> WeirSqlError:
    name = function.name.upper()
    kind = name.rsplit("_", 1)[0]
    window = f"{kind}({', '.join(a.sql(dialect='weir') for a in function.expressions)})"
    return error_at(
        function,
        f"{name} needs a {kind} window in GROUP BY",
        f"add GROUP BY {window}, or select window_start and window_end from {example(kind)}",
    )


def _check_auxiliary(function: exp.Anonymous, call: WindowCall) -> None:
    name = function.name.upper()
    wanted = f"{call.name}_{name.rsplit('_', 1)[1]}"
    window = call.sql(dialect="weir")
    if name != wanted:
        raise error_at(function, f"{name} does not belong to the window GROUP BY {window}", f"use {wanted}")
    if not _same_window(function.expressions, call.expressions):
        raise error_at(
            function,
            f"{name} must repeat the arguments of GROUP BY {window}",
            f"write {wanted}{window[len(call.name):]}, or select {AUXILIARY_COLUMNS[name]}",
        )


def _same_window(given: list[exp.Expr], window: list[exp.Expr]) -> bool:
    def same(a: exp.Expr, b: exp.Expr) -> bool:
        if isinstance(a, exp.Interval) and isinstance(b, exp.Interval):
            try:
                return interval_micros(a) == interval_micros(b)
            except WeirSqlError:
                return False
        return a == b

    return len(given) == len(window) and all(same(a, b) for a, b in zip(given, window))


def _reject_stray_window_syntax(tree: exp.Expr) -> None:
    for node in tree.find_all(WindowCall, TableArgument, Descriptor):
        if isinstance(node, WindowCall):
            raise error_at(
                node,
                f"{node.name}(...) is a window: it belongs in FROM (or in GROUP BY, the legacy way)",
                f"FROM {example(node.name, node)} GROUP BY window_start, window_end",
            )
        raise error_at(node, f"{node.sql(dialect='weir')} can only be an argument of a window table function", "e.g. " + example("TUMBLE"))

"""``LATERAL TABLE(f(x))``: a Python table function applied to every row of the relation before it.

Flink's spellings, all planned as its Correlate:

- ``FROM t, LATERAL TABLE(split(s)) AS T(word, n)`` and ``FROM t CROSS JOIN LATERAL TABLE(...)``
  (and ``JOIN LATERAL TABLE(...) ON TRUE``): an inner join; an input row the function yields
  nothing for is dropped. Another ON condition of an inner join filters the joined rows.
- ``FROM t LEFT JOIN LATERAL TABLE(...) AS T(a) ON TRUE``: an input row without output is kept
  once, with NULLs; as in Flink, the ON condition of a LEFT JOIN must be TRUE.

1. ``fold_lateral`` rewrites the SELECT before anything else plans it: FROM's relation and its
   LATERAL joins become one ``LateralRelation`` (inside a window table function of FROM, which
   commutes with a per-row operator), the joins are gone and an inner join's ON is a WHERE term.
   Every feature (WHERE, projections, GROUP BY, windows, OVER, ...) then plans over one relation.
2. ``plan_lateral`` plans that relation: the input, a ``calc`` computing arguments that are not
   plain columns, then a ``table_function`` node (``engine.operators.table_function``) on a
   forward edge. Its output is the input's columns, then the function's (named by ``AS T(...)``,
   f0, f1, ... without): the input's time attributes and window bounds stay what they were, so a
   window over the result works, and an updating input stays updating, each change's row kind
   carried to all its output rows (no upsert key survives: one row in, many out).
"""
from __future__ import annotations

import inspect

import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND
from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.engine.udfs import arrow_type
from weir.engine.udtfs import TableFunction
from weir.planner.catalog import FunctionDef
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope, bind, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.planner.types import normalise, sql_name
from weir.sql.dialect import LateralTable
from weir.sql.errors import Problem
from weir.sql.statements import WindowTVF

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
table_function = LazyModule("weir.engine.operators.table_function")

#: The prefix of the columns a calc computes for arguments that are expressions.
ARGUMENT = "_lateral_arg"


class LateralRelation(exp.Expression):
    """FROM's relation ``this`` joined with ``call`` (a ``LateralTable``); ``outer``: LEFT JOIN."""

    arg_types = {"this": True, "call": True, "outer": False}


def fold_lateral(qp: QueryPlanning, select: exp.Select) -> exp.Select:
    """``select`` with its LATERAL TABLE joins folded into FROM's relation (``LateralRelation``);
    ``select`` itself when it has none."""
    joins = select.args.get("joins") or []
    if not any(isinstance(j.this, LateralTable) for j in joins):
        return select
    other = next((j for j in joins if not isinstance(j.this, LateralTable)), None)
    if other is not None:
        raise qp.fail("a LATERAL TABLE join and another join in one SELECT are not supported yet", other,
                      "join in a subquery first: FROM (SELECT ... FROM a JOIN b ON ...) AS j, "
                      "LATERAL TABLE(f(j.x)) AS T(y)")
    select = select.copy()
    from_ = select.args["from_"]
    window = from_.this if isinstance(from_.this, WindowTVF) else None
    relation = window.this if window is not None else from_.this
    terms: list[exp.Expression] = []
    for join in select.args["joins"]:
        outer = _outer(qp, join)
        on = join.args.get("on")
        if join.args.get("using"):
            raise qp.fail("LATERAL TABLE joins take ON TRUE, not USING", join.this, "write ON TRUE")
        if on is not None and not _is_true(on):
            if outer:
                raise qp.fail("a LEFT JOIN LATERAL TABLE(...) takes only ON TRUE (as in Flink)", on,
                              "write ON TRUE, and filter the joined rows in WHERE")
            terms.append(on)
        relation = LateralRelation(this=relation, call=join.this, outer=outer)
    select.set("joins", None)
    if window is not None:
        window.set("this", relation)
    else:
        from_.set("this", relation)
    if terms:
        where = select.args.get("where")
        condition = exp.and_(*([where.this] if where is not None else []), *terms)
        select.set("where", exp.Where(this=condition))
    return select


def _outer(qp: QueryPlanning, join: exp.Join) -> bool:
    side = (join.args.get("side") or "").upper()
    if side in ("RIGHT", "FULL"):
        raise qp.fail(f"a {side} JOIN LATERAL TABLE(...) is not supported (nor in Flink)", join.this,
                      "write FROM t, LATERAL TABLE(...) or FROM t LEFT JOIN LATERAL TABLE(...) ON TRUE")
    return side == "LEFT"


def _is_true(node: exp.Expression) -> bool:
    return isinstance(node, exp.Boolean) and node.this is True


def plan_lateral(qp: QueryPlanning, relation: LateralRelation, pipeline: str) -> Stream:
    """The ``table_function`` node of ``relation`` over its input (see the module's docstring)."""
    stream = qp.plan_relation(relation.this, pipeline)
    call: LateralTable = relation.args["call"]
    invocation = call.this
    definition = _table_function(qp, invocation)
    function, spec = definition.function, definition.spec
    arguments = list(invocation.expressions)
    problem = function.arity_problem(len(arguments))
    if problem is not None:
        raise qp.fail(problem, invocation, f"call it as {spec.name}{_signature(function)}")
    names = _column_names(qp, call, function)

    scope = Scope(stream.schema, stream.name, qp.fallback)
    problems: list[Problem] = []
    bound = [bind(a, scope, problems) for a in arguments]
    if problems:
        raise PlanError(problems)
    columns, computed = [], []
    for index, argument in enumerate(bound):
        if isinstance(argument, exp.Column):
            columns.append(argument.name)
        else:
            columns.append(f"{ARGUMENT}{index}")
            computed.append([columns[-1], to_duckdb(argument, scope.schema)])
    if computed:
        stream = qp.plan_pre_aggregate(stream, None, computed, pipeline, invocation)
    kept = [n for n in stream.schema.names if n != ROW_KIND and not n.startswith(ARGUMENT)]
    clash = next((n for n in names if n.lower() in {k.lower() for k in kept}), None)
    if clash is not None:
        raise qp.fail(f"the table function's column `{clash}` has the name of a column of `{stream.name}`", call,
                      f"rename it: AS {_alias_name(call)}({', '.join(n + '_' if n == clash else n for n in names)})")
    results = [pa.field(name, normalise(arrow_type(t))) for name, t in zip(names, function.result_types)]
    row_kind = [] if stream.append_only else [stream.schema.field(ROW_KIND)]
    schema = pa.schema([*(stream.schema.field(n) for n in kept), *results, *row_kind])
    config = table_function.TableFunctionConfig(function=spec, arguments=tuple(columns),
                                                passed=tuple(kept + [f.name for f in row_kind]), columns=tuple(names),
                                                outer=bool(relation.args.get("outer")))
    shown = ", ".join(a.sql(dialect="duckdb") for a in bound)
    description = (f"Correlate(invocation=[{spec.name}({shown})], select=[{', '.join([*kept, *names])}], "
                   f"joinType=[{'LEFT' if config.outer else 'INNER'}])")
    node = qp.builder.add(pipeline, "table_function", config, schema, [Edge(stream.node_id)], description)
    return Stream(node.id, schema, frozenset(stream.time_attributes & set(kept)), stream.name, stream.append_only,
                  None, {k: v for k, v in stream.window_columns.items() if k in kept})


def _table_function(qp: QueryPlanning, invocation: exp.Anonymous) -> FunctionDef:
    name = invocation.name
    definition = qp.catalog.functions.get(name.lower())
    tables = sorted(f.name for f in qp.catalog.functions.values() if isinstance(f.function, TableFunction))
    if definition is None:
        raise qp.fail(f"unknown table function {name}", invocation,
                      f"declare it: CREATE FUNCTION {name} AS 'my_module.{name}' LANGUAGE PYTHON, over a function "
                      f"decorated with @weir.udtf(result_types=[...]); known table functions: "
                      f"{', '.join(tables) or 'none'}")
    if not isinstance(definition.function, TableFunction):
        raise qp.fail(f"{definition.name} is a scalar function; LATERAL TABLE(...) calls a table function",
                      invocation, "call a scalar function in an expression, or declare a table function with "
                                  "@weir.udtf(result_types=[...]) (a generator of rows)")
    return definition


def _alias_name(call: LateralTable) -> str:
    alias = call.args.get("alias")
    return alias.name if alias is not None and alias.name else "T"


def _signature(function: TableFunction) -> str:
    try:
        return str(inspect.signature(function.fn))
    except (TypeError, ValueError):
        return "(...)"


def _column_names(qp: QueryPlanning, call: LateralTable, function: TableFunction) -> list[str]:
    """The output names of the function's columns: ``AS T(a, b)``, or Flink's f0, f1, ..."""
    count = len(function.result_types)
    alias = call.args.get("alias")
    declared = [c.name for c in alias.columns] if alias is not None and alias.columns else None
    if declared is None:
        return [f"f{i}" for i in range(count)]
    if len(declared) != count:
        types = ", ".join(sql_name(normalise(arrow_type(t))) for t in function.result_types)
        names = [*declared, *(f"f{i}" for i in range(len(declared), count))][:count]
        raise qp.fail(f"AS {alias.name}({', '.join(declared)}) names {len(declared)} column(s), but the table "
                      f"function {function.name} yields {count} ({types})", alias,
                      f"name each of its columns: AS {_alias_name(call)}({', '.join(names)})")
    if len({n.lower() for n in declared}) != len(declared):
        raise qp.fail(f"AS {alias.name}({', '.join(declared)}) names a column twice", alias,
                      "give each column its own name")
    return declared

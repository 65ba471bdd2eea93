"""The aggregate calls of a GROUP BY query (window or not): each distinct call named ``_agg0``,
``_agg1``, ..., with its DuckDB SQL and Flink's result type.

A call of a Python aggregate function of the catalog (``engine.udafs``) is parsed as any unknown
function (``exp.Anonymous``); ``python_aggregates`` turns it into a ``PythonAggregateCall``, an
aggregate node, before a query is planned, so that every check for aggregates sees it as one.
"""
from __future__ import annotations


from sqlglot import exp

from weir.engine.operators.accumulators import FUNCTIONS, MERGE_HINT, AggregateCall
from weir.engine.udafs import AggregateUdf
from weir.engine.sql_eval import INPUT
from weir.planner.expressions import AGGREGATES, Scope, bind, position, to_duckdb
from weir.planner.planning import QueryPlanning
from weir.sql.dialect import Weir
from weir.sql.errors import Problem


class PythonAggregateCall(exp.AnonymousAggFunc):
    """A call of a Python aggregate function: ``this`` its name, ``expressions`` its arguments."""

    def text(self) -> str:
        return self.sql(dialect=Weir)


def python_aggregates(query: exp.Expression, catalog) -> exp.Expression:
    """``query`` with every call of a catalog UDAF as a ``PythonAggregateCall`` (``query`` itself
    when there is none)."""
    def aggregate(name: str) -> AggregateUdf | None:
        found = catalog.functions.get(name.lower())
        return found.function if found is not None and isinstance(found.function, AggregateUdf) else None

    if not catalog.functions or not any(isinstance(n, exp.Anonymous) and aggregate(n.name) for n in query.walk()):
        return query

    def replace(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous) and aggregate(node.name) is not None:
            call = PythonAggregateCall(this=node.name, expressions=[e.copy() for e in node.expressions])
            call.meta.update(node.meta)  # its position, for errors
            return call
        return node

    return query.copy().transform(replace)


class AggregateCalls:
    """The distinct aggregate calls of a query, named _agg0, _agg1, ..."""

    def __init__(self, qp: QueryPlanning, input_scope: Scope, problems: list[Problem]):
        self.qp, self.scope, self.problems = qp, input_scope, problems
        self.calls: list[AggregateCall] = []
        self.sql: list[str] = []  # the call as DuckDB SQL, for describe and EXPLAIN
        self._by_sql: dict[str, str] = {}
        #: The Python aggregate calls, by name, with their node (for errors).
        self.python: dict[str, tuple[AggregateUdf, exp.Expression]] = {}

    def typed_sql(self) -> list[str]:
        """Each call's SQL in its result type, for the schema its results have: a Python aggregate's
        is a NULL of its result type (DuckDB knows no such aggregate)."""
        return [f"CAST(NULL AS {c.result_type})" if c.python is not None else typed(sql, c.result_type)
                for c, sql in zip(self.calls, self.sql)]

    def check_merges(self, what: str) -> None:
        """Refuse a Python aggregate without ``merge`` in ``what`` (a window aggregate)."""
        for function, node in self.python.values():
            if not function.merges:
                self.problems.append(Problem(f"the Python aggregate function {node.this} has no merge method, "
                                             f"which {what} needs", *position(node, self.qp.fallback),
                                             MERGE_HINT))

    def check_retracts(self, append_only: bool) -> None:
        """Refuse a Python aggregate without ``retract`` over an updating input."""
        if append_only:
            return
        for function, node in self.python.values():
            if not function.retracts:
                self.problems.append(Problem(
                    f"the Python aggregate function {node.this} has no retract method, and its input is an "
                    "updating stream (rows are retracted)", *position(node, self.qp.fallback),
                    "define retract(self, acc, *args) (or retract_batch(self, acc, *arrays)), which takes a row "
                    "back out of acc, or aggregate an append-only input"))

    def _python_name_for(self, node: exp.Expression, call: PythonAggregateCall,
                         condition: exp.Expression | None) -> str:
        function = self.qp.catalog.functions[call.this.lower()].function
        arguments = list(call.expressions)
        if any(isinstance(a, exp.Distinct) for a in arguments):
            raise self.qp.fail(f"DISTINCT in a call of the Python aggregate function {call.this} is not supported",
                               call, "aggregate the distinct values in the function itself")
        if any(isinstance(a, exp.Star) for a in arguments):
            raise self.qp.fail(f"{call.this}(*): a Python aggregate function takes columns or expressions", call,
                               f"call it with no argument, {call.this}(), to aggregate rows")
        schema = self.scope.schema
        sqls = [to_duckdb(bind(a, self.scope, self.problems), schema) for a in arguments]
        filter_sql = to_duckdb(bind(condition, self.scope, self.problems), schema) if condition is not None else None
        if len(sqls) == 1:
            argument = sqls[0]
        elif not sqls:
            argument = "TRUE"
        else:
            argument = "{" + ", ".join(f"'a{i}': {sql}" for i, sql in enumerate(sqls)) + "}"
        text = f"{call.this}({', '.join(sqls)})" + (f" FILTER (WHERE {filter_sql})" if filter_sql else "")
        if text not in self._by_sql:
            name = f"_agg{len(self.calls)}"
            self._by_sql[text] = name
            spec = function.spec(call.this.lower(), arity=len(sqls))
            self.calls.append(AggregateCall(name=name, function=spec.name, argument=argument, filter=filter_sql,
                                            result_type=spec.result_type, label=call.text(), python=spec))
            self.sql.append(text)
            self.python[name] = (function, call)
        return self._by_sql[text]

    def name_for(self, node: exp.Expression) -> str:
        call = node.this if isinstance(node, exp.Filter) else node
        condition = node.expression.this if isinstance(node, exp.Filter) else None
        if isinstance(call, PythonAggregateCall):
            return self._python_name_for(node, call, condition)
        function = AGGREGATES.get(type(call))
        if function is None:
            raise self.qp.fail(f"aggregate function {call.sql_name()} is not supported yet", call,
                               "supported: COUNT, SUM, MIN, MAX, AVG, with DISTINCT and FILTER (WHERE ...)")
        argument, distinct = call.this, False
        if isinstance(argument, exp.Distinct):
            distinct, argument = True, argument.expressions[0]
        if isinstance(argument, exp.Star):
            argument = None
        schema = self.scope.schema
        arg_sql = to_duckdb(bind(argument, self.scope, self.problems), schema) if argument is not None else None
        filter_sql = to_duckdb(bind(condition, self.scope, self.problems), schema) if condition is not None else None
        text = f"{function}({'DISTINCT ' if distinct else ''}{arg_sql or '*'})"
        if filter_sql:
            text += f" FILTER (WHERE {filter_sql})"
        if text not in self._by_sql:
            name = f"_agg{len(self.calls)}"
            self._by_sql[text] = name
            kind = self._result_type(function, arg_sql, node) if arg_sql is not None else None
            self.calls.append(AggregateCall(name=name, function=function, argument=arg_sql, distinct=distinct,
                                            filter=filter_sql, result_type=kind,
                                            label=node.sql(dialect=Weir) if kind is not None else None))
            self.sql.append(text)
        return self._by_sql[text]

    def _result_type(self, function: str, arg_sql: str, node: exp.Expression) -> str | None:
        """Flink's result type of SUM and AVG as DuckDB type SQL (``AggregateFunction.result_type``)."""
        if function not in ("sum", "avg"):
            return None
        kind = self.qp.describe(f"SELECT {arg_sql} AS a FROM {INPUT}", self.scope.schema, node).field(0).type
        return FUNCTIONS[function].result_type(kind)


def typed(sql: str, result_type: str | None) -> str:
    """An aggregate call's SQL in its ``result_type`` (``AggregateCall.result_type``; None: DuckDB's),
    for the schema its results have."""
    return f"CAST({sql} AS {result_type})" if result_type else sql

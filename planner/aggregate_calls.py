"""The aggregate calls of a GROUP BY query (window or not): each distinct call named ``_agg0``,
``_agg1``, ..., with its DuckDB SQL and Flink's result type."""
from __future__ import annotations


from sqlglot import exp

from weir.engine.operators.accumulators import FUNCTIONS, AggregateCall
from weir.engine.sql_eval import INPUT
from weir.planner.expressions import AGGREGATES, Scope, bind, to_duckdb
from weir.planner.planning import QueryPlanning
from weir.sql.dialect import Weir
from weir.sql.errors import Problem


class AggregateCalls:
    """The distinct aggregate calls of a query, named _agg0, _agg1, ..."""

    def __init__(self, qp: QueryPlanning, input_scope: Scope, problems: list[Problem]):
        self.qp, self.scope, self.problems = qp, input_scope, problems
        self.calls: list[AggregateCall] = []
        self.sql: list[str] = []  # the call as DuckDB SQL, for describe and EXPLAIN
        self._by_sql: dict[str, str] = {}

    def name_for(self, node: exp.Expression) -> str:
        call = node.this if isinstance(node, exp.Filter) else node
        condition = node.expression.this if isinstance(node, exp.Filter) else None
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

"""Planning a streaming ``SELECT ... [ORDER BY ...] LIMIT n``, as Flink runs it.

- ``LIMIT n`` without ORDER BY (Flink's streaming Limit): the first ``n`` rows
  that arrive, an append-only result. A ``limit`` operator after the query,
  fed by a hash edge on no key, lets them through and drops the rest. Which
  rows are first is the order the query's rows reach it: the file order of a
  one-split source; with several splits or parallel inputs, an interleaving
  (as in Flink, whose docs say to add ORDER BY for a deterministic result).
- ``ORDER BY ... LIMIT n`` (Flink's SortLimit): the top ``n`` of the whole
  stream, a ``top_n`` node with no partition: an updating result (a row that
  sorts earlier replaces one of the ``n``). NULLs sort as the dialect's
  ``NULL_ORDERING`` says, as everywhere ORDER BY appears.

Either way the job runs until its sources end (or until stopped), as in Flink.
``OFFSET`` and ``ORDER BY`` without ``LIMIT`` on anything but a time attribute
are refused with a hint; a plain LIMIT over an updating input too.
"""
from __future__ import annotations


import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND
from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope, bind, quote, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.planner.top_n import plan_top_n
from weir.sql.errors import Problem

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
limit_operator = LazyModule("weir.engine.operators.limit")

#: The rank column the Top-N of ORDER BY ... LIMIT computes and the result leaves out.
RANK = "_limit_rank"


def split_limit(qp: QueryPlanning, select: exp.Select) -> tuple[exp.Select, int | None, exp.Order | None]:
    """The SELECT without its ORDER BY and LIMIT, the limit (None: none) and the ORDER BY."""
    limit, order = select.args.get("limit"), select.args.get("order")
    if select.args.get("offset") is not None:
        raise qp.fail("OFFSET in a streaming query is not supported", select.args["offset"],
                      "keep the first rows with LIMIT n, or rank them: ROW_NUMBER() OVER (ORDER BY ...) "
                      "BETWEEN m AND n in an outer query")
    if limit is None:
        return select, None, None
    count = limit.expression
    if not (isinstance(count, exp.Literal) and not count.is_string and count.name.isdigit()):
        raise qp.fail(f"LIMIT takes a whole number of rows, not {count.sql()}", count, "e.g. LIMIT 10")
    plain = select.copy()
    plain.set("limit", None)
    plain.set("order", None)
    return plain, int(count.name), order


def plan_limit(qp: QueryPlanning, stream: Stream, limit: int, order: exp.Order | None,
               pipeline: str, node: exp.Expression) -> Stream:
    """The first ``limit`` rows of ``stream``, or with ``order`` its top ``limit`` rows."""
    if order is not None:
        return _top(qp, stream, limit, order, pipeline)
    if not stream.append_only:
        raise qp.fail("LIMIT without ORDER BY over an updating result is not supported", node,
                      "LIMIT the append-only input in a subquery, or rank the result with ORDER BY ... LIMIT n")
    added = qp.builder.add(pipeline, "limit", limit_operator.LimitConfig(limit=limit), stream.schema,
                           [Edge(stream.node_id, "hash", ())], f"Limit(fetch=[{limit}])")
    return Stream(added.id, stream.schema, stream.time_attributes, stream.name, window_columns=stream.window_columns)


def _top(qp: QueryPlanning, stream: Stream, limit: int, order: exp.Order, pipeline: str) -> Stream:
    scope = Scope(pa.schema([f for f in stream.schema if f.name != ROW_KIND]), stream.name, qp.fallback)
    problems: list[Problem] = []
    order_by = []
    for item in order.expressions:
        bound = bind(item.this, scope, problems)
        if problems:
            continue
        desc = bool(item.args.get("desc"))
        nulls_first = bool(item.args.get("nulls_first"))  # as the dialect reads it (its NULL_ORDERING)
        direction = f"{'DESC' if desc else 'ASC'} NULLS {'FIRST' if nulls_first else 'LAST'}"
        order_by.append((f"{to_duckdb(bound, scope.schema)} {direction}", f"{bound.sql()} {direction}"))
    if problems:
        raise PlanError(problems)
    projection = [[name, quote(name)] for name in scope.schema.names]
    ordered = list(order.expressions)
    return plan_top_n(qp, stream, scope, [], order_by, "row_number", RANK, (1, limit), None, projection,
                      scope.schema, ordered, pipeline)

"""Planning window Top-N and window deduplication into a window_rank operator.

Flink's pattern::

    SELECT * FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end[, keys]
                                   ORDER BY price DESC) AS rownum
      FROM <window aggregate or window table function>
    ) WHERE rownum <= 3

``ROW_NUMBER``, ``RANK`` or ``DENSE_RANK``; the outer WHERE bounds the rank
(``<= N``, ``< N``, ``= N``, ``BETWEEN``, and a lower bound with ``>``/``>=``);
its other conditions filter the ranked rows. ``rownum = 1`` ordered by a time
attribute is window deduplication (ASC keeps the first row, DESC the last).
The rank column may be left out of the outer projection.
"""
from __future__ import annotations


import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND
from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.planner.changelog import require_append_only
from weir.planner.errors import PlanError
from weir.planner.expressions import Scope, bind, output_name, position, quote, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.planner.top_n import is_deduplication, plan_top_n, tie_order
from weir.planner.windows import carried_bounds
from weir.sql.errors import Problem
from weir.sql.statements import WindowTVF

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
window_rank = LazyModule("weir.engine.operators.window_rank")

RANK_FUNCTIONS = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}
WINDOW_BOUNDS = ("window_start", "window_end")
EXAMPLE = ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end "
           "ORDER BY price DESC) AS rownum FROM ...) WHERE rownum <= 3")


def _window_items(select: exp.Select) -> list[exp.Window]:
    return [w for item in select.expressions for w in item.find_all(exp.Window)]


def _ranked_subquery(select: exp.Select) -> exp.Select | None:
    from_ = select.args.get("from_")
    relation = from_.this if from_ is not None else None
    if isinstance(relation, exp.Subquery) and isinstance(relation.this, exp.Select):
        return relation.this if _window_items(relation.this) else None
    return None


def uses_ranking(select: exp.Select) -> bool:
    """True for a SELECT over a subquery computing ROW_NUMBER() OVER (...), or one computing it itself."""
    return bool(_window_items(select)) or _ranked_subquery(select) is not None


def plan_window_rank(qp: QueryPlanning, select: exp.Select, pipeline: str) -> Stream:
    own = _window_items(select)
    if own:
        raise qp.fail("a window function needs an outer query that bounds its rank", own[0],
                      f"rank rows per window and keep the top N: {EXAMPLE}")
    inner = _ranked_subquery(select)
    item, window = _rank_item(qp, inner)
    rank_column = output_name(item, inner.expressions.index(item))
    function = RANK_FUNCTIONS.get(type(window.this))
    problems: list[Problem] = []
    if function is None:
        problems.append(_problem(qp, f"{window.this.sql_name()} is not supported over windows", window,
                                 "use ROW_NUMBER(), RANK() or DENSE_RANK()"))
    partition = window.args.get("partition_by") or []
    named = {p.name.lower() for p in partition if isinstance(p, exp.Column)}
    windowed = set(WINDOW_BOUNDS) <= named  # else: a Top-N of the whole stream, an updating result
    order = window.args.get("order")
    if order is None or not order.expressions:
        problems.append(_problem(qp, f"{(function or 'the rank').upper()}() needs ORDER BY in its OVER clause",
                                 window, "say which rows rank first, e.g. ORDER BY price DESC"))
    low, high, rest = _rank_bounds(select.args.get("where"), rank_column)
    if high is None:
        problems.append(_problem(
            qp, f"the rank `{rank_column}` has no upper bound", select.args.get("where") or select,
            f"keep the top N rows of each window: WHERE {rank_column} <= 3"))
    if problems:
        raise _error(problems)

    stream, hidden, renamed, partition_renamed = _plan_input(qp, inner, item, window, pipeline)
    if windowed:
        require_append_only(qp, stream, "a window Top-N or deduplication", inner)
    scope = Scope(pa.schema([f for f in stream.schema if f.name != ROW_KIND]), stream.name, qp.fallback)
    keys: list[str] = []
    shown_keys: list[str] = []  # as written, for EXPLAIN
    for i, p in enumerate(partition):
        bound = bind(exp.column(partition_renamed[i]) if i in partition_renamed else p, scope, problems)
        if not isinstance(bound, exp.Column):
            problems.append(_problem(qp, f"PARTITION BY {p.sql()} is an expression", p,
                                     "compute it as a column of the inner query and partition by its name"))
        elif bound.name not in keys:
            keys.append(bound.name)
            shown_keys.append(p.sql() if i in partition_renamed else bound.name)
    # an ORDER BY term renamed by _plan_input is bound by its new name, and shown as written
    ordered = [o if i not in renamed else exp.Ordered(this=exp.column(renamed[i]), desc=o.args.get("desc"),
                                                      nulls_first=o.args.get("nulls_first"))
               for i, o in enumerate(order.expressions)]
    order_by = [_order_sql(o, scope, problems, shown=order.expressions[i].this.sql() if i in renamed else None)
                for i, o in enumerate(ordered)]
    if scope.has(rank_column):
        problems.append(_problem(qp, f"the rank column `{rank_column}` is also a column of the input", item,
                                 "name the rank differently, e.g. AS rownum"))
    if problems:
        raise _error(problems)

    ranked = pa.schema([*scope.schema, pa.field(rank_column, pa.int64())])
    # The outer query sees the inner query's columns only, not those added for the OVER clause.
    ranked_scope = Scope(pa.schema([f for f in ranked if f.name not in hidden]), stream.name, qp.fallback)
    projection, times, items = [], set(), []
    for index, out in enumerate(qp.expand_star(select.expressions, ranked_scope)):
        bound = bind(out.unalias() if isinstance(out, exp.Alias) else out, ranked_scope, problems)
        name = output_name(out, index)
        items.append((name, bound))
        projection.append([name, to_duckdb(bound, ranked)])
        if isinstance(bound, exp.Column) and bound.name == "window_time" and "window_time" in stream.time_attributes:
            times.add(name)
    filter_sql = to_duckdb(bind(rest, ranked_scope, problems), ranked) if rest is not None else None
    if problems:
        raise _error(problems)
    schema = qp.describe_projection(projection, filter_sql, ranked, select)
    if not windowed:
        return plan_top_n(qp, stream, scope, keys, order_by, function, rank_column, (low, high), filter_sql,
                          projection, schema, ordered, pipeline, shown_keys=shown_keys)

    window_cols = [k for k in keys if k in WINDOW_BOUNDS]
    others = [k for k in keys if k not in WINDOW_BOUNDS]
    config = window_rank.WindowRankConfig(
        window_start=next(k for k in window_cols if k == "window_start"),
        window_end=next(k for k in window_cols if k == "window_end"),
        partition_keys=others,
        order_by=[sql for sql, _ in order_by],
        function=function,
        rank_column=rank_column,
        rank_range=(low, high),
        filter=filter_sql,
        projection=projection,
        ties=tie_order(function, (low, high), ordered, stream),
    )
    description = _describe(config, [text for _, text in order_by], ordered, stream, dict(zip(keys, shown_keys)))
    edge = Edge(stream.node_id, "hash", ("window_start", "window_end", *others))
    node = qp.builder.add(pipeline, "window_rank", config, schema, [edge], description)
    return Stream(node.id, schema, frozenset(times), stream.name, window_columns=carried_bounds(stream.window_columns, items))


def _rank_item(qp: QueryPlanning, inner: exp.Select) -> tuple[exp.Expression, exp.Window]:
    """The inner select item that is a window function (possibly aliased), and the window."""
    items = [i for i in inner.expressions if i.find(exp.Window) is not None]
    for item in items[1:]:
        raise qp.fail("only one window function per query is supported", item,
                      "rank once: ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY ...)")
    item = items[0]
    window = item.unalias() if isinstance(item, exp.Alias) else item
    if not isinstance(window, exp.Window):
        raise qp.fail("a window function inside an expression is not supported", item,
                      "select the rank as a column of its own: ROW_NUMBER() OVER (...) AS rownum")
    if window.args.get("spec") is not None:
        raise qp.fail("a window frame (ROWS/RANGE) is not supported for ranking", window.args["spec"])
    return item, window


def _plan_input(qp: QueryPlanning, inner: exp.Select, item: exp.Expression, window: exp.Window,
                pipeline: str) -> tuple[Stream, frozenset[str], dict[int, str], dict[int, str]]:
    """The inner query without its window function, the names of the columns added to it, and
    the ORDER BY and the PARTITION BY terms given a name of their own (by position). As in
    Flink, PARTITION BY and ORDER BY may name columns of the inner query's FROM that its SELECT
    leaves out (``SELECT window_start, ... PARTITION BY window_start, window_end``); they are
    selected too, for the rank only. An ORDER BY column with its table's name (``B.date_time``)
    is selected under a name of its own (``__order_<i>``): the SELECT's column of that name may
    be another table's (``SELECT A.*, B.date_time AS bid_time``), and the rank must order by the
    one named. So is a PARTITION BY column with its table's name (``__partition_<i>``), unless
    the SELECT selects that very column under its name: then the partition key stays a column
    of the result (its upsert key)."""
    rest = [i for i in inner.expressions if i is not item]
    relation = inner.args["from_"].this
    star_only = all(isinstance(i, exp.Star) for i in rest)
    plain = not any(inner.args.get(k) for k in ("where", "group", "having", "joins"))
    if star_only and plain and not isinstance(relation, WindowTVF):
        return qp.plan_relation(relation, pipeline), frozenset(), {}, {}
    copy = inner.copy()
    added: list[str] = []
    order = window.args.get("order")
    partition = window.args.get("partition_by") or []
    renamed = {i: f"__order_{i}" for i, o in enumerate(order.expressions if order else [])
               if isinstance(o.this, exp.Column) and o.this.table}
    partition_renamed = {i: f"__partition_{i}" for i, p in enumerate(partition)
                         if isinstance(p, exp.Column) and p.table and p.name.lower() not in WINDOW_BOUNDS
                         and not _selects_itself(rest, p)}
    qualified = [exp.alias_(order.expressions[i].this.copy(), name) for i, name in renamed.items()]
    qualified += [exp.alias_(partition[i].copy(), name) for i, name in partition_renamed.items()]
    if not any(isinstance(i, exp.Star) for i in rest):
        selected = {output_name(i, n).lower() for n, i in enumerate(rest)}
        referenced = [*(window.args.get("partition_by") or []), *(order.expressions if order else [])]
        for column in (c for node in referenced for c in node.find_all(exp.Column)):
            if not column.table and column.name.lower() not in selected and column.name not in added:
                added.append(column.name)
    copy.set("expressions", [i.copy() for i in rest] + [exp.column(name) for name in added] + qualified
             or [exp.Star()])
    hidden = frozenset(added) | frozenset(renamed.values()) | frozenset(partition_renamed.values())
    return qp.plan_query(copy, pipeline), hidden, renamed, partition_renamed


def _selects_itself(items: list[exp.Expression], column: exp.Column) -> bool:
    """True if the SELECT ``items`` give ``column`` (``T.c``) under its own name ``c``: as
    ``T.c``, ``T.c AS c``, ``T.*``, or ``*`` (all tables' columns, as before table names
    counted). Otherwise ``c`` in the SELECT's output is another table's, or not selected."""
    table, name = column.table.lower(), column.name.lower()
    for item in items:
        if isinstance(item, exp.Star):
            return True
        target = item.unalias() if isinstance(item, exp.Alias) else item
        if not isinstance(target, exp.Column) or target.table.lower() != table:
            continue
        if isinstance(target.this, exp.Star) or (target.name.lower() == name and item.alias_or_name.lower() == name):
            return True
    return False


def _order_sql(ordered: exp.Ordered, scope: Scope, problems: list[Problem],
               shown: str | None = None) -> tuple[str, str]:
    """(DuckDB SQL with direction and NULLs order, the text for EXPLAIN: ``shown`` if given)."""
    bound = bind(ordered.this, scope, problems)
    direction = "DESC" if ordered.args.get("desc") else "ASC"
    nulls = "NULLS FIRST" if ordered.args.get("nulls_first") else "NULLS LAST"
    sql = to_duckdb(bound, scope.schema)
    return f"{sql} {direction} {nulls}", f"{shown or sql} {direction}"


def _literal_int(node: exp.Expression) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        try:
            return int(node.this)
        except ValueError:
            return None
    return None


def _rank_bounds(where: exp.Where | None, rank: str) -> tuple[int, int | None, exp.Expression | None]:
    """(lowest rank kept, highest or None, the other conditions) from the outer WHERE."""
    low, high, rest = 1, None, []
    conjuncts = list(where.this.flatten()) if where is not None and isinstance(where.this, exp.And) else (
        [where.this] if where is not None else [])

    def is_rank(node):
        return isinstance(node, exp.Column) and node.name.lower() == rank.lower()

    for c in conjuncts:
        if isinstance(c, exp.Between) and is_rank(c.this):
            lo, hi = _literal_int(c.args["low"]), _literal_int(c.args["high"])
            if lo is not None and hi is not None:
                low, high = max(low, lo), hi if high is None else min(high, hi)
                continue
        if isinstance(c, (exp.LTE, exp.LT, exp.EQ, exp.GTE, exp.GT)):
            left, right = c.this, c.expression
            op = type(c)
            if is_rank(right) and _literal_int(left) is not None:  # 3 >= rownum
                left, right = right, left
                op = {exp.LTE: exp.GTE, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ}[op]
            n = _literal_int(right)
            if is_rank(left) and n is not None:
                top = {exp.LTE: n, exp.LT: n - 1, exp.EQ: n}.get(op)
                bottom = {exp.GTE: n, exp.GT: n + 1, exp.EQ: n}.get(op)
                if top is not None:
                    high = top if high is None else min(high, top)
                if bottom is not None:
                    low = max(low, bottom)
                continue
        rest.append(c)
    return low, high, exp.and_(*rest) if rest else None


def _describe(config: "window_rank.WindowRankConfig", order_text: list[str], ordered: list[exp.Ordered],
              stream: Stream,
              shown: dict[str, str]) -> str:
    partition = ", ".join([config.window_start, config.window_end, *(shown[k] for k in config.partition_keys)])
    select = ", ".join(n if s == quote(n) else f"{n}={s}" for n, s in config.projection)
    low, high = config.rank_range
    if is_deduplication(config.function, (low, high), ordered, stream):
        keep = "last row" if ordered[0].args.get("desc") else "first row"
        return (f"WindowDeduplicate(keep=[{keep}], partitionBy=[{partition}], orderBy=[{order_text[0]}], "
                f"select=[{select}]" + (f", where=[{config.filter}]" if config.filter else "") + ")")
    rank = f"{config.function.upper()}() " + (f"<= {high}" if low == 1 else f"BETWEEN {low} AND {high}")
    return (f"WindowRank(partitionBy=[{partition}], orderBy=[{', '.join(order_text)}], rank=[{rank}], "
            f"rankColumn=[{config.rank_column}], select=[{select}]"
            + (f", where=[{config.filter}]" if config.filter else "") + ")")


def _problem(qp: QueryPlanning, message: str, node: exp.Expression, hint: str) -> Problem:
    line, col = position(node, qp.fallback)
    return Problem(message, line, col, hint)


def _error(problems: list[Problem]):
    return PlanError(problems)

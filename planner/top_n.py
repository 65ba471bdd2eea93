"""Planning Top-N and deduplication without a window into a ``top_n`` operator.

``SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY price DESC) AS rn
FROM t) WHERE rn <= 3`` without window_start and window_end in PARTITION BY ranks the
whole stream: the result changes as rows arrive (or are retracted), so it is an
updating stream. ``rn = 1`` ordered by a time attribute is deduplication (ASC keeps
the first row, DESC the last). ``planner/ranking.py`` reads the pattern; this module
adds the node.

The result's key: the partition keys and the rank, when ROW_NUMBER's rank is
selected (each pair names one row); otherwise none, and a view of it is kept as
a multiset.
"""
from __future__ import annotations


import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND, ROW_KIND_TYPE
from weir.engine.graph import Edge
from weir.engine.lazy_registry import LazyModule
from weir.planner.expressions import Scope, quote
from weir.planner.graph_builder import Stream
from weir.planner.planning import QueryPlanning
from weir.planner.state_ttl import state_ttl_ms

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
top_n_operator = LazyModule("weir.engine.operators.top_n")


def plan_top_n(qp: QueryPlanning, stream: Stream, scope: Scope, keys: list[str], order_by: list[tuple[str, str]],
               function: str, rank_column: str, rank_range: tuple[int, int], filter_sql: str | None,
               projection: list[list[str]], schema: pa.Schema, ordered: list[exp.Ordered], pipeline: str,
               shown_keys: list[str] | None = None) -> Stream:
    config = top_n_operator.TopNConfig(
        columns=scope.schema.names,
        partition_keys=keys,
        order_by=[sql for sql, _ in order_by],
        function=function,
        rank_column=rank_column,
        rank_range=rank_range,
        filter=filter_sql,
        projection=projection,
        append_only_input=stream.append_only,
        ttl_ms=state_ttl_ms(qp),
        ties=tie_order(function, rank_range, ordered, stream),
    )
    low, high = rank_range
    order_text = ", ".join(text for _, text in order_by)
    select = ", ".join(n if s == quote(n) else f"{n}={s}" for n, s in projection)
    partition = ", ".join(shown_keys or keys) or "-"
    if is_deduplication(function, rank_range, ordered, stream):
        keep = "last row" if ordered[0].args.get("desc") else "first row"
        description = f"Deduplicate(keep=[{keep}], partitionBy=[{partition}], orderBy=[{order_text}], select=[{select}]"
    else:
        rank = f"{function.upper()}() " + (f"<= {high}" if low == 1 else f"BETWEEN {low} AND {high}")
        description = (f"Rank(partitionBy=[{partition}], orderBy=[{order_text}], rank=[{rank}], "
                       f"rankColumn=[{rank_column}], select=[{select}]")
    description += (f", where=[{filter_sql}]" if filter_sql else "") + ")"
    edge = Edge(stream.node_id, "hash", tuple(keys)) if keys else Edge(stream.node_id, "hash", ())
    out = schema.append(pa.field(ROW_KIND, ROW_KIND_TYPE))
    node = qp.builder.add(pipeline, "top_n", config, out, [edge], description, label="top_n")
    return Stream(node.id, out, frozenset(), stream.name, append_only=False,
                  upsert_key=_key(keys, rank_column, function, high, projection))


def _key(keys: list[str], rank_column: str, function: str, high: int,
         projection: list[list[str]]) -> tuple[str, ...] | None:
    """The output names of a unique key of the result: the partition keys for a Top-1 of
    ROW_NUMBER, with its rank for a Top-N; None when they are not all selected (or ties)."""
    if function != "row_number":
        return None
    names = {sql: name for name, sql in projection}
    for wanted in ([quote(k) for k in keys], [quote(k) for k in keys] + [quote(rank_column)]):
        if (high == 1 or quote(rank_column) in wanted) and all(w in names for w in wanted):
            return tuple(names[w] for w in wanted)
    return None


def is_deduplication(function: str, rank_range: tuple[int, int], ordered: list[exp.Ordered], stream: Stream) -> bool:
    """Flink's deduplication: ROW_NUMBER() = 1 ordered by one time attribute."""
    return (function == "row_number" and tuple(rank_range) == (1, 1) and len(ordered) == 1
            and isinstance(ordered[0].this, exp.Column) and ordered[0].this.name in stream.time_attributes)


def tie_order(function: str, rank_range: tuple[int, int], ordered: list[exp.Ordered], stream: Stream) -> str:
    """Which of the rows that tie on ORDER BY ranks first, as in Flink: the earliest to arrive
    (Top-N, first-row deduplication), except that keep-last deduplication (ORDER BY time DESC)
    keeps the latest of rows with the same time."""
    if is_deduplication(function, rank_range, ordered, stream) and ordered[0].args.get("desc"):
        return "latest_first"
    return "earliest_first"

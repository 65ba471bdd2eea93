"""Column pruning before a join: each input keeps only the columns the query reads.

A join keeps its inputs' rows as state and copies them into every pair it emits, so a column
nobody reads costs memory, snapshot bytes and copying for as long as the row is kept (Nexmark's
q4 joins auctions and bids on four of their seventeen columns; its long ``extra`` strings
doubled the job's time and memory). As Flink's projection push-down, a ``calc`` picking the
read columns goes before each join input's exchange.

What the query reads is found in the SELECT's own clauses (its list, WHERE, ON, USING, GROUP
BY, HAVING, QUALIFY, window specifications), not in the relations it joins, which were planned
already. Pruning is conservative: ``*`` keeps every column (``a.*`` every column of ``a``), a
name whose relation is unclear (unqualified, or qualified by a name that is no input, as in a
correlated subquery) keeps the column of that name on both sides, and a subquery anywhere in
those clauses keeps everything; so does a script with a late-rows table (a late row is kept
whole there).
"""
from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND
from weir.engine.graph import Edge
from weir.engine.operators.calc import CalcConfig
from weir.planner.calc import calc_description
from weir.planner.expressions import quote
from weir.planner.graph_builder import Stream
from weir.planner.joins.scope import Relation
from weir.planner.late_rows import OPTION as LATE_ROWS_OPTION
from weir.planner.planning import QueryPlanning

#: Every column of a relation.
ALL = None


def read_columns(select: exp.Select, relations: list[Relation]) -> list[set[str] | None]:
    """Per relation, the lower-cased names of the columns ``select`` reads (``ALL``: every one)."""
    read: list[set[str] | None] = [set() for _ in relations]
    aliases = [r.alias.lower() for r in relations]

    def keep_all(index: int | None) -> None:
        for i in range(len(read)) if index is None else [index]:
            read[i] = ALL

    for node in _clauses(select):
        if isinstance(node, (exp.Subquery, exp.Exists)) or (isinstance(node, exp.In) and node.args.get("query")):
            keep_all(None)
        elif isinstance(node, exp.Star):
            owner = node.parent
            if isinstance(owner, exp.Column) and owner.table:
                keep_all(aliases.index(owner.table.lower()) if owner.table.lower() in aliases else None)
            elif not isinstance(owner, exp.Count):
                keep_all(None)
        elif isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            table = node.table.lower()
            for i in [aliases.index(table)] if table in aliases else range(len(relations)):
                if read[i] is not ALL:
                    read[i].add(node.name.lower())
        elif isinstance(node, exp.Identifier) and isinstance(node.parent, exp.Join):  # JOIN ... USING (k)
            for i, names in enumerate(read):
                if names is not ALL:
                    names.add(node.name.lower())
    return read


def _clauses(select: exp.Select):
    """Every node of ``select`` outside the relations of its FROM and JOINs."""
    for key, value in select.args.items():
        if key == "from_" or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, exp.Expression):
                continue
            if isinstance(item, exp.Join):
                for part in ("on", "using"):
                    value = item.args.get(part)
                    for child in value if isinstance(value, list) else [value]:
                        if isinstance(child, exp.Expression):
                            yield from child.walk()
                continue
            yield from item.walk()


def prune(qp: QueryPlanning, select: exp.Select, relations: list[Relation], pipeline: str) -> None:
    """Narrow each relation's stream to the columns ``select`` reads (its keys, times and window
    bounds among them: the join condition names them); a relation that would lose none is left
    as it is."""
    if _keeps_late_rows(qp):
        return
    read = read_columns(select, relations)
    for relation, names in zip(relations, read):
        if names is ALL:
            continue
        schema = relation.stream.schema
        wanted = names | {ROW_KIND.lower()}
        columns = [n for n in schema.names if n.lower() in wanted]
        if len(columns) == len(schema.names) or not columns:
            continue
        relation.stream = _picked(qp, relation.stream, columns, pipeline)
        relation.output_names = [relation.output_names[schema.names.index(n)] for n in columns]
        relation.visible = [n for n in relation.visible if n in columns]


def _keeps_late_rows(qp: QueryPlanning) -> bool:
    """Whether a table of the script lists its late rows ('source.late-rows.table'): a window or
    interval join keeps each late row whole there, so its inputs keep every column."""
    return any(table.options.get(LATE_ROWS_OPTION) for table in qp.catalog.tables.values())


def _picked(qp: QueryPlanning, stream: Stream, columns: list[str], pipeline: str) -> Stream:
    projection = [[name, quote(name)] for name in columns]
    schema = pa.schema([stream.schema.field(name) for name in columns])
    node = qp.builder.add(pipeline, "calc", CalcConfig(projection=projection), schema, [Edge(stream.node_id)],
                          calc_description(projection, None, stream.schema.names), label="prune")
    key = stream.upsert_key if stream.upsert_key and set(stream.upsert_key) <= set(columns) else None
    return Stream(node.id, schema, stream.time_attributes & set(columns), stream.name, stream.append_only, key,
                  {n: bound for n, bound in stream.window_columns.items() if n in columns})

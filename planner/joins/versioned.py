"""Planning joins with a table as of a time: lookup joins and event-time temporal joins.

``FROM s JOIN t FOR SYSTEM_TIME AS OF s.x AS d ON s.k = d.k`` (INNER or LEFT), Flink's spelling:

- when ``s.x`` is an event-time attribute of ``s`` (it has a watermark), ``t`` is a
  versioned table — a stream whose every row is a new version of its key from its
  time on — and each row of ``s`` is joined with the version valid at ``s.x``
  (``temporal_join``, keyed by the join keys, emitting when the watermark passes);
- otherwise (``s.x`` is ``PROCTIME()``, processing time) ``t`` is looked up as it is
  when the row arrives (``lookup_join``: a ``duckdb`` table queried per batch, or a
  file read once as a side input), and ``t`` is never read as a stream.

Both keep the stream's time attributes: a window can follow.
"""
from __future__ import annotations


import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND, ROW_KIND_TYPE
from weir.engine.graph import Edge, schema_to_json
from weir.engine.lazy_registry import LazyModule
from weir.planner.catalog import TableDef
from weir.planner.errors import PlanError
from weir.planner.expressions import bind, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.joins.conditions import JoinPlanner
from weir.planner.joins.scope import JoinScope, Relation, conjuncts, join_clause, left_bounds, output_names, project_joined
from weir.planner.planning import QueryPlanning
from weir.sql.errors import Problem

#: The operators this module plans, imported once a query has one (``engine.lazy_registry``).
lookup_join = LazyModule("weir.engine.operators.lookup_join")
temporal_join = LazyModule("weir.engine.operators.temporal_join")


def is_versioned_join(select: exp.Select) -> bool:
    joins = select.args.get("joins") or []
    return bool(joins) and isinstance(joins[0].this, exp.Table) and joins[0].this.args.get("version") is not None


def plan_versioned_join(qp: QueryPlanning, select: exp.Select, pipeline: str) -> Stream:
    """A temporal join when AS OF names an event-time attribute of the stream, else a lookup join."""
    joins = select.args["joins"]
    if len(joins) > 1:
        raise qp.fail("a SELECT may join two inputs; join a third in a query around it", joins[1])
    join_type, table_node, condition = join_clause(qp, joins[0])
    if join_type not in ("inner", "left") or condition is None:
        raise qp.fail("a join FOR SYSTEM_TIME AS OF is INNER or LEFT JOIN ... ON", joins[0],
                      "JOIN t FOR SYSTEM_TIME AS OF s.time_column AS d ON s.k = d.k")
    planner = JoinPlanner(qp, select, pipeline)
    left = planner.plan_side(select.args["from_"].this)
    left.visible = [n for n in left.visible if n != ROW_KIND]
    as_of = table_node.args["version"].args.get("expression")
    problems: list[Problem] = []
    time_column = JoinScope([left], qp.fallback).locate(as_of, problems) if isinstance(as_of, exp.Column) else None
    if time_column is None:
        raise PlanError(problems) if problems else qp.fail(
            "FOR SYSTEM_TIME AS OF needs a time column of the joined stream", as_of,
            "FOR SYSTEM_TIME AS OF s.proc_time (a lookup) or s.event_time (a temporal join)")
    if time_column[1] in left.stream.time_attributes:
        return _plan_temporal_join(planner, join_type, left, table_node, condition, time_column[1])
    return _plan_lookup_join(planner, join_type, left, table_node, condition)


def _plan_temporal_join(planner: JoinPlanner, join_type: str, left: Relation, table_node: exp.Table,
                        condition: exp.Expression, time_column: str) -> Stream:
    """``temporal_join``: each row of ``left`` with the version of the versioned table valid at its time."""
    qp, alias = planner.qp, table_node.alias or table_node.name
    plain = table_node.copy()
    plain.set("version", None)
    right = planner.plan_side(plain)
    if not right.stream.time_attributes:
        raise qp.fail(f"`{alias}` has no watermark: an event-time temporal join needs a versioned table",
                      table_node, f"declare WATERMARK FOR its version time in CREATE TABLE {table_node.name}")
    if not right.stream.append_only:
        raise qp.fail(f"`{alias}` is an updating stream; a temporal join reads versions from an append-only one",
                      table_node)
    left_keys, right_keys = _keys(planner, left, right, condition, alias, lookup=False)
    left_columns, schema = _output(left, right)
    residual, remaining = _conditions(planner)
    if residual and join_type == "left":
        raise qp.fail("a LEFT temporal join's ON holds key equalities only", residual[0],
                      "filter the versioned table in a subquery")
    if ROW_KIND in left.stream.schema.names:
        raise qp.fail("a temporal join of an updating stream is not supported", planner.select,
                      "join the append-only stream, then aggregate")
    right_time = next(iter(sorted(right.stream.time_attributes)))
    config = temporal_join.TemporalJoinConfig(
        join_type=join_type,
        left=temporal_join.TemporalJoinSide(schema=schema_to_json(left_columns), keys=left_keys,
                                            time=time_column, names=left_columns.names),
        right=temporal_join.TemporalJoinSide(schema=schema_to_json(right.stream.schema), keys=right_keys,
                                             time=right_time, names=right.output_names),
    )
    description = (f"TemporalJoin(joinType=[{'LeftOuterJoin' if join_type == 'left' else 'InnerJoin'}], "
                   f"asOf=[{time_column}], version=[{alias}.{right_time}], leftKeys=[{', '.join(left_keys)}], "
                   f"rightKeys=[{', '.join(right_keys)}])")
    edges = [Edge(left.stream.node_id, "hash", tuple(left_keys)),
             Edge(right.stream.node_id, "hash", tuple(right_keys))]
    node = qp.builder.add(planner.pipeline, "temporal_join", config, schema, edges, description,
                          label="temporal_join")
    return _project(planner, node.id, schema, left, right, alias, [*residual, *remaining])


def _plan_lookup_join(planner: JoinPlanner, join_type: str, left: Relation, table_node: exp.Table,
                      condition: exp.Expression) -> Stream:
    """``lookup_join``: the table looked up as it is when a row of ``left`` arrives."""
    qp, alias = planner.qp, table_node.alias or table_node.name
    found = qp.catalog.lookup(table_node.name)
    if not isinstance(found, TableDef):
        raise qp.fail(f"`{table_node.name}` must be a table to look up (declared with CREATE TABLE)", table_node,
                      "declare the lookup table with 'connector' = 'duckdb' or 'filesystem'")
    if found.computed:
        raise qp.fail(f"the lookup table `{found.name}` has computed columns "
                      f"({', '.join(found.computed)}), which a lookup join does not compute yet", table_node,
                      "compute them in the query: JOIN the table's physical columns and add the "
                      "expressions to the SELECT list")
    fake = Stream("", found.schema, frozenset(), found.name)
    right = Relation(alias, fake, list(found.schema.names), list(found.schema.names))
    left_keys, right_keys = _keys(planner, left, right, condition, alias, lookup=True)
    left_columns, schema = _output(left, right)
    residual, remaining = _conditions(planner)
    residual_sql = None
    if residual and join_type == "left":  # the lookup evaluates them: they decide what matches
        problems: list[Problem] = []
        both = JoinScope([left, right], qp.fallback)
        bound = bind(exp.and_(*residual), both, problems)
        if problems:
            raise PlanError(problems)
        residual_sql = to_duckdb(bound, both.schema)
    else:
        remaining = [*residual, *remaining]
    if ROW_KIND in left.stream.schema.names:
        schema = schema.append(pa.field(ROW_KIND, ROW_KIND_TYPE))
    config = lookup_join.LookupJoinConfig(
        join_type=join_type,
        keys=left_keys,
        names=left_columns.names,
        lookup=lookup_join.LookupTable(table=found.name, options=dict(found.options),
                                       schema=schema_to_json(found.schema), keys=right_keys,
                                       names=right.output_names),
        residual=residual_sql,
    )
    description = (f"LookupJoin(table=[{found.name}], joinType=[{'LeftOuterJoin' if join_type == 'left' else 'InnerJoin'}], "
                   f"lookup=[{', '.join(f'{r}={l}' for l, r in zip(left_keys, right_keys))}]"
                   + (f", where=[{residual_sql}]" if residual_sql else "") + ")")
    node = qp.builder.add(planner.pipeline, "lookup_join", config, schema, [Edge(left.stream.node_id)], description,
                          label="lookup_join")
    return _project(planner, node.id, schema, left, right, alias, remaining)


def _keys(planner: JoinPlanner, left: Relation, right: Relation, condition: exp.Expression, alias: str,
          lookup: bool) -> tuple[list[str], list[str]]:
    """The key columns of both sides from ON's equalities; a lookup table's keys are its columns."""
    qp = planner.qp
    pairs = planner.pairs_from_condition(condition, JoinScope([left, right], qp.fallback))
    if planner.problems:
        raise PlanError(planner.problems)
    if not pairs:
        raise qp.fail(f"the join with `{alias}` has no equality on its keys", condition,
                      "join on equalities: ON s.k = d.k")
    right_stream_before = right.stream
    left_keys, right_keys = planner.key_columns(pairs, left, right)
    if planner.problems:
        raise PlanError(planner.problems)
    if lookup and right.stream is not right_stream_before:
        raise qp.fail(f"the keys of the lookup table `{alias}` must be its columns, of the stream's key types",
                      condition, "compute and CAST on the stream's side: ON CAST(s.k AS BIGINT) = d.id")
    return left_keys, right_keys


def _output(left: Relation, right: Relation) -> tuple[pa.Schema, pa.Schema]:
    """The stream's columns (without its row kind), and the join's output: those, then the table's."""
    left.visible = [n for n in left.visible if n != ROW_KIND]
    left_columns = pa.schema([f for f in left.stream.schema if f.name != ROW_KIND])
    right.output_names = output_names(list(left_columns.names), list(right.stream.schema.names))
    left.output_names = list(left_columns.names) + ([ROW_KIND] if ROW_KIND in left.stream.schema.names else [])
    schema = pa.schema([*left_columns, *(f.with_name(n) for f, n in zip(right.stream.schema, right.output_names))])
    return left_columns, schema


def _conditions(planner: JoinPlanner) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """The ON terms that are no key equalities, and the WHERE terms."""
    where = planner.select.args.get("where")
    return [term for term, _ in planner.residual], conjuncts(where.this) if where is not None else []


def _project(planner: JoinPlanner, node_id: str, schema: pa.Schema, left: Relation, right: Relation, alias: str,
             remaining: list[exp.Expression]) -> Stream:
    joined = Stream(node_id, schema, left.stream.time_attributes, f"{left.alias} JOIN {alias}",
                    append_only=ROW_KIND not in left.stream.schema.names, window_columns=left_bounds(left))
    return project_joined(planner.qp, planner.select, joined, JoinScope([left, right], planner.qp.fallback),
                          remaining, planner.pipeline)

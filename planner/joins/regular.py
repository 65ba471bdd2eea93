"""Planning regular joins: two streams joined on key equalities, without a window.

Flink's regular (streaming) join. Spellings: ``FROM a [INNER | LEFT | RIGHT |
FULL] JOIN b ON a.k = b.k [AND <condition>]``, ``FROM a, b WHERE a.k = b.k
...``, and ``[NOT] IN`` / ``[NOT] EXISTS`` subqueries over a stream (SEMI and
ANTI joins). Either input may be an updating stream.

Plan: as for window joins (``planner/joins/conditions.py`` plans both inputs, finds the
key equalities, computes key expressions before a hash edge on each side), a
``stream_join`` node keeps both inputs' rows and joins every batch of one side
with the other side's rows. Conditions of ON that are not key equalities are
evaluated by the join (for an outer, SEMI or ANTI join they decide what
matches); those of an INNER join that read one input filter that input
before the join, and the WHERE terms that read both are evaluated by the
join too, on each pair (Flink pushes them into the join condition).

Output: the left columns, then the right ones, and ``_row_kind`` unless the
join is an INNER or SEMI join of two append-only inputs (then every output row
is an insert and stays one). Time attributes become plain timestamps, as in
Flink: a row of a regular join can be emitted long after its watermark passed.

State: every row of both inputs, for ever — unless ``'table.exec.state.ttl'``
or the hint ``/*+ STATE_TTL('alias' = '1h', ...) */`` after SELECT bounds how
long a row is kept (processing time since it arrived, as Flink's TTL).
"""
from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from weir.engine.changelog import ROW_KIND, ROW_KIND_TYPE
from weir.engine.graph import Edge, schema_to_json
from weir.engine.lazy_registry import LazyModule
from weir.engine.sql_eval import INPUT
from weir.planner.errors import PlanError
from weir.planner.expressions import bind, to_duckdb
from weir.planner.graph_builder import Stream
from weir.planner.joins.conditions import JoinPlanner
from weir.planner.joins.scope import (DESCRIBED_TYPES, JoinScope, Pair, Relation, left_bounds, output_names,
                                      project_joined)
from weir.planner.state_ttl import state_ttl
from weir.sql.errors import Problem

#: The operator this module plans, imported once a query has one (``engine.lazy_registry``).
stream_join = LazyModule("weir.engine.operators.stream_join")


def plan_regular_join(planner: JoinPlanner, join_type: str, left: Relation, right: Relation,
                      pairs: list[Pair], remaining: list[exp.Expression], null_aware: bool) -> Stream:
    qp, select = planner.qp, planner.select
    if not pairs:
        raise qp.fail(f"the join of `{left.alias}` and `{right.alias}` has no equality between them", select,
                      "a streaming join keeps the rows of both inputs by key: join on an equality, "
                      "e.g. ON a.id = b.id (a cross join would keep every row for ever)")
    residual_terms = [term for term, _ in planner.residual]
    if join_type == "inner":  # each input's own terms of ON and WHERE filter it before the join,
        # the terms reading both the pairs inside it (Flink's join condition)
        residual_terms, remaining = _push_down([*residual_terms, *remaining], (left, right), qp, planner.pipeline)
    for relation in (left, right):
        _drop_row_kind(relation)
    left_keys, right_keys = planner.key_columns(pairs, left, right)
    if planner.problems:
        raise PlanError(planner.problems)
    for relation in (left, right):
        _drop_row_kind(relation)  # a key calc passes it through again
    right.output_names = output_names(left.output_names, right.output_names)
    both = JoinScope([left, right], qp.fallback)
    residual = None
    if residual_terms:
        problems: list[Problem] = []
        bound = bind(exp.and_(*residual_terms), both, problems)
        if problems:
            raise PlanError(problems)
        residual = to_duckdb(bound, both.schema)
        qp.describe(f"SELECT ({residual}) AS c FROM {INPUT}", both.schema, residual_terms[0])

    append_inputs = left.stream.append_only and right.stream.append_only
    changelog = not (append_inputs and join_type in ("inner", "semi"))
    relations = [left] if join_type in ("semi", "anti") else [left, right]
    scope = JoinScope(relations, qp.fallback)
    schema = scope.schema
    if changelog:
        schema = schema.append(pa.field(ROW_KIND, ROW_KIND_TYPE))
    ttl = state_ttl(qp.settings, select, left.alias, right.alias, qp)
    config = stream_join.StreamJoinConfig(
        join_type=join_type,
        null_aware=null_aware,
        residual=residual,
        changelog=changelog,
        ttl_ms=ttl,
        left=stream_join.StreamJoinSide(schema=schema_to_json(_columns(left)), keys=left_keys,
                                        names=left.output_names[:len(_columns(left))]),
        right=stream_join.StreamJoinSide(schema=schema_to_json(_columns(right)), keys=right_keys,
                                         names=right.output_names[:len(_columns(right))]),
    )
    description = (f"Join(joinType=[{DESCRIBED_TYPES[join_type]}{', null-aware' if null_aware else ''}], "
                   f"leftKeys=[{', '.join(left_keys)}], rightKeys=[{', '.join(right_keys)}]"
                   + (f", where=[{residual}]" if residual else "")
                   + (f", stateTtl=[{ttl} ms]" if any(ttl.values()) else "") + ")")
    edges = [Edge(r.stream.node_id, "hash", tuple(k)) for r, k in ((left, left_keys), (right, right_keys))]
    node = qp.builder.add(planner.pipeline, "stream_join", config, schema, edges, description, label="join")
    joined = Stream(node.id, schema, frozenset(), f"{left.alias} JOIN {right.alias}", append_only=not changelog,
                    window_columns=left_bounds(left))
    return project_joined(qp, select, joined, scope, remaining, planner.pipeline)


def _push_down(terms: list[exp.Expression], relations: tuple[Relation, Relation], qp, pipeline: str
               ) -> tuple[list[exp.Expression], list[exp.Expression]]:
    """Filter each input by the terms that read only its columns (less state, as Flink's
    filter push-down). Of the terms left: those reading both inputs that the join can evaluate on
    each pair (no aggregate, window function or subquery), and the rest."""
    scope = JoinScope(list(relations), qp.fallback)
    own: list[list[exp.Expression]] = [[], []]
    both, rest = [], []
    for term in terms:
        read = {located[0] for column in term.find_all(exp.Column)
                if (located := scope.locate(column, [])) is not None}
        nodes = [type(n) for n in term.walk()]
        if len(read) == 1 and not any(issubclass(n, (exp.AggFunc, exp.Subquery)) for n in nodes):
            own[read.pop()].append(term)
        elif read == {0, 1} and not any(issubclass(n, (exp.AggFunc, exp.Subquery, exp.Window)) for n in nodes):
            both.append(term)
        else:
            rest.append(term)
    for relation, mine in zip(relations, own):
        if not mine:
            continue
        problems: list[Problem] = []
        alone = JoinScope([relation], qp.fallback)
        bound = bind(exp.and_(*mine), alone, problems)
        if problems:
            rest.extend(mine)
            continue
        relation.stream = qp.plan_pre_aggregate(relation.stream, to_duckdb(bound, relation.stream.schema), [],
                                                pipeline, mine[0])
    return both, rest


def _drop_row_kind(relation: Relation) -> None:
    """An updating input's ``_row_kind`` is the join's business, not a column of the join."""
    relation.visible = [n for n in relation.visible if n != ROW_KIND]
    names = relation.stream.schema.names
    if ROW_KIND in names:
        relation.output_names = [n for n in relation.output_names if n != ROW_KIND]


def _columns(relation: Relation) -> pa.Schema:
    return pa.schema([f for f in relation.stream.schema if f.name != ROW_KIND])

"""CREATE and DROP FUNCTION, and which of the catalog's Python UDFs a JobGraph carries.

``CREATE FUNCTION f AS 'pkg.mod.f' LANGUAGE PYTHON`` imports ``pkg.mod`` now, at plan time, so
that a missing module, a missing name or a function that is no ``@weir.udf`` is refused where it
is written (``engine.udfs.load``). The graph carries the functions its SQL calls; every process
that runs it imports them again by module and name. A Python aggregate function
(``engine.udafs``: a class with Flink's AggregateFunction methods) is declared the same way, and
travels on its calls' ``AggregateCall.python`` instead of the graph's ``functions``.

With a bad-rows table ('python.udf.bad-rows.table') an aggregate's argument or FILTER that calls a
Python UDF is computed by a ``calc`` before the aggregate (``compute_udf_arguments``), so that a
row the UDF raises on is kept out there, before it reaches the aggregate: as if it never arrived.
"""
from __future__ import annotations

import dataclasses
import json
import re

import pyarrow as pa

from weir.engine.graph import Edge, JobGraph, OperatorNode
from weir.engine.operators.accumulators import AggregateCall
from weir.engine.operators.calc import CalcConfig
from weir.engine.sql_eval import INPUT, describe
from weir.engine import udafs
from weir.engine.udfs import ScalarFunction, UdfError
from weir.engine.udtfs import load
from weir.planner.calc import calc_description
from weir.planner.catalog import Catalog, register_function
from weir.planner.expressions import quote
from weir.planner.graph_builder import GraphBuilder
from weir.planner.locate import locate, name, quoted
from weir.sql import statements as st
from weir.sql.errors import Problem, WeirSqlError


def create_function(catalog: Catalog, s: st.CreateFunction) -> None:
    if "." in s.name:
        raise WeirSqlError(Problem(f"the function name {s.name} has a catalog or database part",
                                   *locate(s, re.escape(s.name)), f"name it without one: {s.name.rsplit('.', 1)[-1]}"))
    if s.name.lower() in catalog.functions:
        if s.if_not_exists:
            return
        raise WeirSqlError(Problem(f"the function {s.name} already exists", *locate(s, name(s.name), after="FUNCTION"),
                                   f"DROP FUNCTION {s.name} first, or write CREATE FUNCTION IF NOT EXISTS"))
    try:
        function = _aggregate(s.target) or load(s.target)
        register_function(catalog, function, s.name)
    except UdfError as error:
        raise WeirSqlError(Problem(error.message, *locate(s, quoted(s.target)), error.hint)) from None


def _aggregate(target: str):
    """The Python aggregate function (``engine.udafs``) ``target`` names, or None when it names
    something else (a scalar UDF: ``engine.udfs.load`` judges it)."""
    module, dot, attribute = target.strip().rpartition(".")
    if not dot or not module or not attribute:
        return None
    try:
        value = udafs.import_attribute(module, attribute, what=target)
    except UdfError:
        return None  # load() says why, as for a scalar UDF
    if udafs.declaration(value) is not None:
        return udafs.declaration(value)
    if udafs.looks_aggregate(value):
        return udafs.AggregateUdf(value, result_type=None)  # a result type from get_result_type(), or refused
    return None


def drop_function(catalog: Catalog, s: st.DropFunction) -> None:
    if not catalog.drop_function(s.name) and not s.if_exists:
        known = ", ".join(sorted(f.name for f in catalog.functions.values())) or "none"
        raise WeirSqlError(Problem(f"unknown function {s.name}", *locate(s, name(s.name), after="FUNCTION"),
                                   f"known functions: {known}; DROP FUNCTION IF EXISTS drops nothing silently"))


def graph_functions(graph: JobGraph, catalog: Catalog) -> list[dict]:
    """The specs (JSON) of the catalog's scalar functions that the graph's SQL calls: ``name(`` in a
    config. (A table function's spec is in the config of its ``table_function`` node.)"""
    configs = json.dumps([node.config_json() for node in graph.nodes])
    return [f.spec.to_json() for key, f in sorted(catalog.functions.items())
            if isinstance(f.function, ScalarFunction) and re.search(rf"(?<![\w.]){re.escape(key)}\s*\(", configs, re.IGNORECASE)]


#: The prefix of the columns a calc computes for aggregate arguments that call a Python UDF.
UDF_ARGUMENT = "_udf_arg"


def compute_udf_arguments(builder: GraphBuilder, calls: re.Pattern) -> list[OperatorNode]:
    """Every aggregate argument and FILTER (an ``AggregateCall`` of a config's ``aggregates``) whose SQL
    ``calls`` a Python UDF computed as a column ``_udf_arg<i>`` by a new ``calc`` between the
    aggregate and its input (the aggregate's own exchange after it); the call reads that column.
    The calcs added: the bad-rows table keeps the rows their UDFs raise on (``late_rows``)."""
    graph, added = builder.graph, []
    for node in list(graph.nodes):
        config = node.config
        if not dataclasses.is_dataclass(config) or "aggregates" not in {f.name for f in dataclasses.fields(config)}:
            continue
        if not all(isinstance(call, AggregateCall) for call in config.aggregates or ()):
            continue  # OVER's calls: its planner computes their arguments in a calc before it already
        computed: list[list[str]] = []
        aggregates = []
        for call in config.aggregates or ():
            changes = {}
            for part in ("argument", "filter"):
                sql = getattr(call, part)
                if sql and calls.search(sql):
                    changes[part] = quote(f"{UDF_ARGUMENT}{len(computed)}")
                    computed.append([f"{UDF_ARGUMENT}{len(computed)}", sql])
            aggregates.append(dataclasses.replace(call, **changes) if changes else call)
        if not computed or len(node.inputs) != 1:
            continue
        consumer = _expand_before(graph, node, computed) or node  # GROUPING SETS: before its copies
        (edge,) = consumer.inputs
        source = graph.node(edge.source)
        projection = [[name, quote(name)] for name in source.output_schema.names] + computed
        select_list = ", ".join(f"{sql} AS {quote(name)}" for name, sql in projection)
        schema = describe(f"SELECT {select_list} FROM {INPUT}", source.output_schema)
        calc = OperatorNode(builder.new_id(node.id.rpartition(".")[0] or node.id, "udf_arguments"), "calc",
                            CalcConfig(projection=projection), schema, [Edge(source.id, "forward", (), edge.port)],
                            calc_description(projection, None, source.output_schema.names))
        graph.nodes.insert(graph.nodes.index(consumer), calc)
        consumer.inputs = [Edge(calc.id, edge.partitioning, edge.keys)]
        if consumer is not node:  # the Expand passes the computed columns on to the aggregate
            passed = [[name, quote(name)] for name, _ in computed]
            consumer.config = dataclasses.replace(consumer.config, projection=(*consumer.config.projection, *passed))
            consumer.output_schema = pa.schema([*consumer.output_schema, *(schema.field(n) for n, _ in computed)])
        node.config = dataclasses.replace(config, aggregates=tuple(aggregates))
        added.append(calc)
    return added


def _expand_before(graph: JobGraph, node: OperatorNode, computed: list[list[str]]) -> OperatorNode | None:
    """The Expand (GROUPING SETS' ``calc``) feeding only ``node``, when the ``computed`` arguments read
    only the columns it passes unchanged and it filters nothing (its WHERE may keep rows from the
    UDF): they are computed before it, once per input row, so a bad row is kept once, not once
    per grouping set."""
    source = graph.node(node.inputs[0].source)
    if source.kind != "calc" or source.config.expand is None or source.config.filter or len(source.inputs) != 1 \
            or [n.id for n, _ in graph.consumers(source.id)] != [node.id]:
        return None
    made = [name for name, sql in source.config.projection if sql != quote(name)] + [source.config.expand.column]
    if any(quote(name) in sql for name in made for _, sql in computed):
        return None
    return source

"""Window joins in the planner: the plan each spelling gets, and the errors a person can act on."""
from __future__ import annotations

import pytest
from sqlglot import exp

from weir.engine.operators.window_join import WindowJoinSide
from weir.planner.expressions import Scope, bind
from weir.planner.joins import output_names
from weir.planner.planner import plan_script
from weir.sql import Problem, WeirSqlError, parse

CATALOG = """\
CREATE TABLE l (num INT, id VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE r (num BIGINT, id VARCHAR, price DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE plain (num INT, ts TIMESTAMP(3)) WITH ('connector' = 'nexmark', 'table' = 'bid');
"""
LW = "TABLE(TUMBLE(TABLE l, DESCRIPTOR(ts), INTERVAL '5' MINUTES))"
RW = "TABLE(TUMBLE(TABLE r, DESCRIPTOR(ts), INTERVAL '5' MINUTES))"
ON = "L.num = R.num AND L.window_start = R.window_start AND L.window_end = R.window_end"


def plan(query: str, settings: dict | None = None):
    script = plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};"), settings=settings)
    return script.graph


def join_node(graph):
    (node,) = [n for n in graph.nodes if n.kind == "window_join"]
    return node


def problems(query: str) -> list[Problem]:
    with pytest.raises(WeirSqlError) as raised:
        plan(query)
    return raised.value.problems


def at(query: str, needle: str) -> tuple[int, int]:
    text = CATALOG + "CREATE MATERIALIZED VIEW v AS " + query
    offset = text.index(needle, len(CATALOG))
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


@pytest.mark.parametrize(("spelling", "join_type"), [
    ("JOIN", "inner"), ("INNER JOIN", "inner"), ("LEFT JOIN", "left"), ("LEFT OUTER JOIN", "left"),
    ("RIGHT JOIN", "right"), ("FULL OUTER JOIN", "full"), ("FULL JOIN", "full"),
])
def test_join_types(spelling, join_type):
    graph = plan(f"SELECT L.num, R.id FROM {LW} L {spelling} {RW} R ON {ON}")
    node = join_node(graph)
    assert node.config.join_type == join_type
    # each input keeps the columns the query reads (planner/joins/pruning.py)
    assert node.config.left == WindowJoinSide(columns=["num", "window_start", "window_end"],
                                              keys=["num"], window_start="window_start", window_end="window_end")
    assert node.config.right.columns == ("num", "id", "window_start", "window_end")
    assert [(e.partitioning, e.keys) for e in node.inputs] == [("hash", ("num",)), ("hash", ("num",))]
    assert node.output_schema.names == ["num", "window_start", "window_end", "num0", "id", "window_start0",
                                        "window_end0"]
    (calc,) = graph.consumers(node.id)
    assert calc[0].config.projection == (("num", '"num"'), ("id", '"id"'))


def test_select_star_keeps_every_column_and_renames_the_right_ones():
    node = join_node(plan(f"SELECT * FROM {LW} L JOIN {RW} R ON {ON}"))
    assert node.config.left.columns == ("num", "id", "ts", "window_start", "window_end", "window_time")
    assert node.output_schema.names[6:] == ["num0", "id0", "price", "ts0", "window_start0", "window_end0",
                                           "window_time0"]


def test_nexmark_q8_follows_renamed_window_bounds_through_window_aggregates():
    query = """SELECT P.num, P.starttime FROM (
        SELECT num, window_start AS starttime, window_end AS endtime FROM """ + LW + """
        GROUP BY num, window_start, window_end) P
      JOIN (SELECT num AS seller, window_start AS starttime, window_end AS endtime FROM """ + RW + """
        GROUP BY num, window_start, window_end) A
      ON P.num = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime"""
    node = join_node(plan(query))
    assert node.config.left.window_start == "starttime"
    assert node.config.right.keys == ("seller",)
    assert [plan(query).node(e.source).kind for e in node.inputs] == ["window_aggregate", "window_aggregate"]


def test_semi_and_anti_spellings():
    tuple_in = f"SELECT * FROM {LW} WHERE (num, window_start, window_end) IN " \
               f"(SELECT num, window_start, window_end FROM {RW})"
    node = join_node(plan(tuple_in))
    assert (node.config.join_type, node.config.null_aware) == ("semi", False)
    node = join_node(plan(tuple_in.replace(" IN ", " NOT IN ")))
    assert (node.config.join_type, node.config.null_aware) == ("anti", True)
    exists = f"SELECT L.id FROM {LW} L WHERE L.id <> 'x' AND NOT EXISTS (SELECT * FROM {RW} R " \
             f"WHERE {ON} AND R.price > 10)"
    graph = plan(exists)
    node = join_node(graph)
    assert (node.config.join_type, node.config.null_aware) == ("anti", False)
    assert node.output_schema.names == ["num", "id", "ts", "window_start", "window_end", "window_time"]
    right_filter = graph.node(node.inputs[1].source)
    assert right_filter.config.filter == '"price" > 10'
    (outer, _), = graph.consumers(node.id)
    assert outer.config.filter == "\"id\" <> 'x'"


def test_keys_of_different_types_and_expressions_are_computed_before_the_exchange():
    graph = plan(f"SELECT L.id FROM {LW} L JOIN {RW} R ON L.num + 1 = R.price "
                 "AND L.window_start = R.window_start AND L.window_end = R.window_end")
    node = join_node(graph)
    assert node.config.left.keys == node.config.right.keys == ("_jk0",)
    left_keys = graph.node(node.inputs[0].source)
    assert left_keys.config.projection[-1] == ("_jk0", 'CAST(("num" + 1) AS DOUBLE)')
    assert graph.node(node.inputs[1].source).config.projection[-1] == ("_jk0", 'CAST(("price") AS DOUBLE)')


def test_star_names_right_columns_that_clash_like_flink():
    graph = plan(f"SELECT * FROM {LW} L JOIN {RW} R ON {ON}")
    (calc, _), = graph.consumers(join_node(graph).id)
    assert [name for name, _ in calc.config.projection] == [
        "num", "id", "ts", "window_start", "window_end", "window_time",
        "num0", "id0", "price", "ts0", "window_start0", "window_end0", "window_time0"]
    graph = plan(f"SELECT R.* FROM {LW} L JOIN {RW} R ON {ON}")
    (calc, _), = graph.consumers(join_node(graph).id)
    assert calc.output_schema.names[0] == "num0"


def test_output_names():
    assert output_names(["a", "B"], ["b", "c", "b0", "b"]) == ["b0", "c", "b00", "b1"]


def test_a_single_relation_scope_still_ignores_qualifiers():
    import pyarrow as pa

    found: list[Problem] = []
    bound = bind(exp.column("Price", table="b"), Scope(pa.schema([("price", pa.int64())]), "bids"), found)
    assert (bound.sql(), found) == ('"price"', [])


# -- errors -----------------------------------------------------------------------------------


def test_a_join_without_window_bounds_is_a_regular_join():
    graph = plan("SELECT * FROM l JOIN r ON l.num = r.num")
    assert [n.kind for n in graph.nodes if "join" in n.kind] == ["stream_join"]


def test_a_join_with_window_start_only_names_what_is_missing():
    query = f"SELECT L.id FROM {LW} L JOIN {RW} R ON L.num = R.num AND L.window_start = R.window_start"
    (problem,) = problems(query)
    assert "no equality on window_end" in problem.message


def test_different_windows_are_refused():
    query = f"SELECT L.id FROM {LW} L JOIN {RW.replace('5', '10')} R ON {ON}"
    (problem,) = problems(query)
    assert problem.message == ("the inputs of a window join use different windows: `L` TUMBLE(ts, 5 min), "
                               "`R` TUMBLE(ts, 10 min)")
    assert "same window" in problem.hint


def test_an_inner_window_joins_other_conditions_filter_the_joined_rows():
    """As in Flink (Nexmark q5: ``AuctionBids.num >= MaxBids.maxn`` in ON), in the join itself:
    the rows they reject never leave it."""
    graph = plan(f"SELECT L.id FROM {LW} L JOIN {RW} R ON {ON} AND L.num < R.num AND L.id = 'x'")
    join = join_node(graph)
    assert join.config.condition == "\"num\" < \"num0\" AND \"id\" = 'x'"
    assert join.description.endswith(f"where=[{join.config.condition}])")
    (calc,) = graph.consumers(join.id)
    assert calc[0].config.filter is None


def test_where_terms_with_functions_and_after_an_outer_join_filter_after_it():
    """A function (maybe a Python UDF, whose bad rows the calc keeps) filters in the calc after
    the join, and so does every WHERE term over an outer join (its NULL rows are filtered too)."""
    graph = plan(f"SELECT L.id FROM {LW} L JOIN {RW} R ON {ON} WHERE upper(L.id) = 'X' AND L.num > 1")
    join = join_node(graph)
    assert join.config.condition == "\"num\" > 1"
    (calc,) = graph.consumers(join.id)
    assert calc[0].config.filter.startswith("UPPER(") and "num" not in calc[0].config.filter
    graph = plan(f"SELECT L.id FROM {LW} L LEFT JOIN {RW} R ON {ON} WHERE R.num > 1")
    join = join_node(graph)
    assert join.config.condition is None
    (calc,) = graph.consumers(join.id)
    assert calc[0].config.filter == "\"num0\" > 1"


def test_outer_window_join_non_equi_conditions_and_mixed_bounds_are_reported_together():
    query = (f"SELECT L.id FROM {LW} L LEFT JOIN {RW} R ON L.num < R.num AND L.window_start = R.window_end "
             "AND L.window_end = R.window_end AND L.id = 'x'")
    found = problems(query)
    messages = [p.message for p in found]
    assert messages == [
        "the window join condition `L.num < R.num` is not an equality",
        "`L.id = 'x'` does not compare a column of `L` with one of `R`",
    ]
    assert (found[0].line, found[0].col) == at(query, "L.num < R.num")
    query = f"SELECT L.id FROM {LW} L JOIN {RW} R ON L.window_start = R.window_end AND L.window_end = R.window_end"
    (problem,) = problems(query)
    assert problem.message == "`L.window_start = R.window_end` equates window_start of `L` with window_end of `R`"


def test_ambiguous_and_unknown_names_say_which_candidates_exist():
    query = f"SELECT num FROM {LW} L JOIN {RW} R ON {ON}"
    (problem,) = problems(query)
    assert problem.message == "column `num` is ambiguous: `L.num` and `R.num`"
    assert problem.hint == "qualify it: `L.num` or `R.num`"
    assert (problem.line, problem.col) == at(query, "num FROM")
    found = problems(f"SELECT X.num, R.nope FROM {LW} L JOIN {RW} R ON {ON}")
    assert [p.message for p in found] == ["unknown table `X` in `X.num`", "unknown column `nope` in `R`"]
    assert found[0].hint == "the query reads `L`, `R`"


def test_an_input_without_a_window_is_a_regular_join():
    found = problems(f"SELECT L.id FROM {LW} L JOIN plain P ON L.num = P.num "
                     "AND L.window_start = P.ts AND L.window_end = P.ts")
    assert [p.message for p in found] == [
        "`L.window_start = P.ts` equates window_start of `L` with a column of `P`",
        "`L.window_end = P.ts` equates window_end of `L` with a column of `P`",
    ]


@pytest.mark.parametrize(("query", "message"), [
    (f"SELECT L.id FROM {LW} L CROSS JOIN {RW} R", "CROSS JOIN is not supported"),
    (f"SELECT L.id FROM {LW} L, {RW} R", "has no equality between them"),
    (f"SELECT L.id, COUNT(*) FROM {LW} L JOIN {RW} R ON {ON} GROUP BY L.id", "GROUP BY over a window join"),
])
def test_unsupported_shapes(query, message):
    (problem,) = problems(query)
    assert message in problem.message

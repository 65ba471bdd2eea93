"""Plans of UNION ALL, CTEs, interval joins and OVER aggregates, and their errors: each names the
problem, points at its line and column and gives a hint."""
from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from weir.engine.operators.over_aggregate import OverFrame
from weir.planner.planner import plan_script
from weir.planner.queries import QueryPlanner
from weir.sql import Problem, WeirSqlError, parse

CATALOG = """\
CREATE TABLE a (id INT, v VARCHAR, ts TIMESTAMP(3), n INT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE b (id BIGINT, w VARCHAR, ts TIMESTAMP(3), x DOUBLE,
  WATERMARK FOR ts AS ts) WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE plain (id BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'nexmark', 'table' = 'bid');
"""


def plan(query: str, settings: dict | None = None):
    return plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW out AS {query};"), settings=settings).graph


def nodes(graph, kind: str):
    return [n for n in graph.nodes if n.kind == kind]


def problems(query: str) -> list[Problem]:
    with pytest.raises(WeirSqlError) as raised:
        plan(query)
    return raised.value.problems


def at(query: str, needle: str) -> tuple[int, int]:
    text = CATALOG + "CREATE MATERIALIZED VIEW out AS " + query
    offset = text.index(needle, len(CATALOG))
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def sink_input(graph):
    (sink,) = nodes(graph, "sink")
    return graph.node(sink.inputs[0].source)


# -- UNION ALL ------------------------------------------------------------------------------------


def test_union_all_widens_types_and_takes_the_first_names():
    graph = plan("SELECT id, v, ts FROM a UNION ALL SELECT id, w, ts FROM b UNION ALL SELECT id, 'p', ts FROM plain")
    (union,) = nodes(graph, "union")
    assert union.output_schema == pa.schema([("id", pa.int64()), ("v", pa.string()), ("ts", pa.timestamp("us"))])
    assert len(union.inputs) == 3
    cast = graph.node(union.inputs[0].source)
    assert cast.config.projection[0] == ("id", 'CAST("id" AS BIGINT)')


def test_a_union_keeps_a_time_attribute_only_when_every_side_has_it():
    window = "TABLE(TUMBLE(TABLE ({}), DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
    ok = "SELECT id, ts FROM a UNION ALL SELECT id, ts FROM b"
    plan(f"SELECT window_start, COUNT(*) AS c FROM {window.format(ok)} GROUP BY window_start, window_end")
    no = "SELECT id, ts FROM a UNION ALL SELECT id, ts FROM plain"
    (problem,) = problems(f"SELECT window_start, COUNT(*) AS c FROM {window.format(no)} GROUP BY window_start, window_end")
    assert "not a time attribute" in problem.message


def test_union_of_numbers_and_strings_names_the_column():
    query = "SELECT id, v FROM a UNION ALL SELECT id, ts FROM b"
    (problem,) = problems(query)
    assert problem.message == ("column 2 (`v`) of the UNION ALL is VARCHAR in one query and TIMESTAMP(3) (`ts`) "
                               "in another")
    assert "CAST(ts AS VARCHAR)" in problem.hint
    assert (problem.line, problem.col) == at(query, "ts FROM b")


def test_union_numbers_widen_to_double():
    graph = plan("SELECT id, x FROM b UNION ALL SELECT n, n FROM a")
    assert nodes(graph, "union")[0].output_schema.field("x").type == pa.float64()


def test_union_needs_as_many_columns_on_every_side():
    (problem,) = problems("SELECT id FROM a UNION ALL SELECT id, w FROM b")
    assert "different numbers of columns: 1 (id) and 2 (id, w)" in problem.message


@pytest.mark.parametrize(("operation", "hint"), [("UNION", "use UNION ALL"), ("INTERSECT", "INTERSECT"),
                                                 ("EXCEPT", "EXCEPT")])
def test_distinct_set_operations_are_refused(operation, hint):
    (problem,) = problems(f"SELECT id FROM a {operation} SELECT id FROM b")
    assert f"{operation} over streams is not supported" in problem.message
    assert hint in problem.hint


def test_a_union_with_an_updating_input_is_updating_and_its_append_only_inputs_insert():
    graph = plan("SELECT id FROM a UNION ALL SELECT id FROM (SELECT id, COUNT(*) AS n FROM b GROUP BY id)")
    (union,) = nodes(graph, "union")
    assert union.output_schema.names == ["id", "_row_kind"]
    first = graph.node(union.inputs[0].source)
    assert first.config.projection[-1] == ("_row_kind", "CAST(0 AS TINYINT)")


# -- CTEs and subqueries -------------------------------------------------------------------------------


def test_ctes_read_earlier_ctes_and_hide_tables():
    graph = plan("WITH a AS (SELECT id + 1 AS id, ts FROM a), c(k, t) AS (SELECT id, ts FROM a) SELECT k FROM c")
    calcs = nodes(graph, "calc")
    assert calcs[0].config.projection[0] == ("id", '"id" + 1')
    assert sink_input(graph).output_schema.names == ["k"]


def test_a_cte_keeps_its_time_attribute_under_a_new_name():
    plan("WITH c(k, t) AS (SELECT id, ts FROM a) SELECT window_start, COUNT(*) AS n "
         "FROM TABLE(TUMBLE(TABLE c, DESCRIPTOR(t), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end")


def test_a_cte_cannot_read_a_later_one():
    query = "WITH c AS (SELECT * FROM d), d AS (SELECT * FROM a) SELECT * FROM c"
    (problem,) = problems(query)
    assert problem.message == "unknown table `d`"


def test_cte_errors():
    (problem,) = problems("WITH c AS (SELECT * FROM a), c AS (SELECT * FROM b) SELECT * FROM c")
    assert problem.message == "WITH defines `c` twice"
    (problem,) = problems("WITH c(x) AS (SELECT id, ts FROM a) SELECT * FROM c")
    assert problem.message == "`c` names 1 columns but its query gives 2 (id, ts)"
    (problem,) = problems("WITH RECURSIVE c AS (SELECT id FROM a) SELECT * FROM c")
    assert "WITH RECURSIVE" in problem.message


def test_a_view_does_not_see_the_ctes_of_the_statement_reading_it():
    script = plan_script(parse(CATALOG + "CREATE VIEW ids AS SELECT id FROM a;\n"
                               "CREATE MATERIALIZED VIEW out AS WITH a AS (SELECT id + 100 AS id FROM b) "
                               "SELECT id FROM ids UNION ALL SELECT id FROM a;"))
    reads = {n.inputs[0].source for n in nodes(script.graph, "calc")}
    assert {"a.source", "b.source"} <= reads  # the view reads the table a, the query the CTE a
    (plus_100,) = [n for n in nodes(script.graph, "calc") if ("id", '"id" + 100') in n.config.projection]
    assert plus_100.inputs[0].source == "b.source"


def test_nested_subqueries_in_from():
    graph = plan("SELECT t.k FROM (SELECT u.id AS k FROM (SELECT id FROM a WHERE n > 1) AS u) AS t")
    assert sink_input(graph).output_schema.names == ["k"]


# -- interval joins ------------------------------------------------------------------------------------

HOUR, MINUTE, SECOND = 3_600_000_000, 60_000_000, 1_000_000


@pytest.mark.parametrize(("condition", "bounds"), [
    ("b.ts BETWEEN a.ts - INTERVAL '1' HOUR AND a.ts + INTERVAL '10' MINUTE", (-HOUR, False, 10 * MINUTE, False)),
    ("b.ts >= a.ts - INTERVAL '1' HOUR AND b.ts < a.ts + INTERVAL '10' MINUTE", (-HOUR, False, 10 * MINUTE, True)),
    ("a.ts <= b.ts + INTERVAL '1' HOUR AND a.ts > b.ts", (-HOUR, False, 0, True)),
    ("a.ts BETWEEN b.ts - INTERVAL '5' SECOND AND b.ts", (0, False, 5 * SECOND, False)),
    ("b.ts = a.ts", (0, False, 0, False)),
    ("b.ts >= a.ts AND b.ts >= a.ts + INTERVAL '1' SECOND AND b.ts <= a.ts + INTERVAL '2' SECOND",
     (SECOND, False, 2 * SECOND, False)),
])
def test_interval_spellings(condition, bounds):
    graph = plan(f"SELECT a.id, b.w FROM a JOIN b ON a.id = b.id AND {condition}")
    (join,) = nodes(graph, "interval_join")
    config = join.config
    assert (config.lower, config.lower_strict, config.upper, config.upper_strict) == bounds
    assert (config.left.time, config.right.time) == ("ts", "ts")
    assert [(e.partitioning, e.keys) for e in join.inputs] == [("hash", ("id",)), ("hash", ("id",))]


@pytest.mark.parametrize(("spelling", "join_type"), [("JOIN", "inner"), ("LEFT JOIN", "left"),
                                                     ("RIGHT OUTER JOIN", "right"), ("FULL JOIN", "full")])
def test_interval_join_types(spelling, join_type):
    graph = plan(f"SELECT * FROM a {spelling} b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE")
    (join,) = nodes(graph, "interval_join")
    assert join.config.join_type == join_type
    assert join.output_schema.names == ["id", "v", "ts", "n", "id0", "w", "ts0", "x"]


def test_the_joined_rows_keep_both_time_attributes():
    plan("WITH j AS (SELECT a.id, a.ts AS a_ts, b.ts AS b_ts FROM a JOIN b ON a.id = b.id "
         "AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE) "
         "SELECT window_start, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE j, DESCRIPTOR(b_ts), INTERVAL '1' MINUTE)) "
         "GROUP BY window_start, window_end")


def test_an_inner_interval_joins_other_conditions_filter_the_joined_rows():
    graph = plan("SELECT a.id FROM a JOIN b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE "
                 "AND a.v <> b.w WHERE a.n > 2")
    assert sink_input(graph).config.filter == '"n" > 2 AND "v" <> "w"'


def test_an_equality_within_one_input_filters_an_inner_interval_join():
    graph = plan("SELECT a.id FROM a JOIN b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE "
                 "AND a.n = 3 AND b.w = a.v")
    (join,) = nodes(graph, "interval_join")
    assert (join.config.left.keys, join.config.right.keys) == (("id", "v"), ("id", "w"))
    assert graph.node(join.inputs[0].source).config.filter == '"n" = 3'


def test_a_time_bound_on_one_side_is_a_regular_join_with_that_condition():
    # As in Flink: an interval join needs both bounds; else the comparison is a join condition.
    graph = plan("SELECT a.id FROM a LEFT JOIN b ON a.id = b.id AND b.ts >= a.ts")
    (join,) = nodes(graph, "stream_join")
    assert join.config.residual == '"ts0" >= "ts"' and not nodes(graph, "interval_join")


def test_interval_join_bound_errors():
    (problem,) = problems("SELECT a.id FROM a JOIN b ON a.id = b.id AND b.ts BETWEEN a.ts + INTERVAL '1' HOUR AND a.ts")
    assert problem.message == "the interval join's bounds leave no interval: 1 h to 0 s"
    (problem,) = problems("SELECT a.id FROM a LEFT JOIN b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts "
                          "+ INTERVAL '1' HOUR AND a.v <> b.w")
    assert problem.message == ("the condition `a.v <> b.w` of a LEFT interval join is neither a key equality, "
                               "a time bound nor a filter of the input padded with NULLs")
    (problem,) = problems("SELECT a.id FROM a LEFT JOIN b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts "
                          "+ INTERVAL '1' HOUR AND a.n > 1")
    assert "`a.n > 1` of a LEFT interval join" in problem.message


@pytest.mark.parametrize(("spelling", "filtered"), [("JOIN", ["a", "b"]), ("LEFT JOIN", ["b"]),
                                                    ("RIGHT JOIN", ["a"])])
def test_conditions_on_one_input_filter_it_before_the_join(spelling, filtered):
    condition = "a.n > 1" if filtered != ["b"] else "b.x > 1"
    condition += " AND b.x > 1" if filtered == ["a", "b"] else ""
    graph = plan(f"SELECT a.id FROM a {spelling} b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts "
                 f"+ INTERVAL '1' HOUR AND {condition}")
    (join,) = nodes(graph, "interval_join")
    inputs = [graph.node(e.source) for e in join.inputs]
    assert [getattr(n.config, "filter", None) for n in inputs] == [
        '"n" > 1' if "a" in filtered else None, '"x" > 1' if "b" in filtered else None]
    assert sink_input(graph).config.filter is None


def test_a_range_over_a_column_without_watermark_is_a_regular_join():
    graph = plan("SELECT a.id FROM a JOIN plain p ON a.id = p.id AND p.ts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR")
    assert nodes(graph, "stream_join") and not nodes(graph, "interval_join")


def test_a_join_without_time_bounds_stays_a_regular_join():
    for condition in ("a.id = b.id AND a.n < b.x", "a.id = b.id"):
        graph = plan(f"SELECT a.id FROM a JOIN b ON {condition}")
        assert nodes(graph, "stream_join") and not nodes(graph, "interval_join")


def test_interval_join_over_an_updating_stream_is_refused(monkeypatch):
    original = QueryPlanner.source

    def updating(self, table):
        stream = original(self, table)
        return dataclasses.replace(stream, append_only=False) if table.name == "b" else stream

    monkeypatch.setattr(QueryPlanner, "source", updating)
    (problem,) = problems("SELECT a.id FROM a JOIN b ON a.id = b.id AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' HOUR")
    assert problem.message.startswith("an interval join over an updating stream (the result of `b`) is not supported")


# -- OVER aggregates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("window", "frame"), [
    ("ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW", {"kind": "rows", "preceding": 10}),
    ("ORDER BY ts ROWS 3 PRECEDING", {"kind": "rows", "preceding": 3}),
    ("ORDER BY ts RANGE BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW", {"kind": "range", "preceding": HOUR}),
    ("ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", {"kind": "unbounded", "mode": "rows"}),
    ("ORDER BY ts", {"kind": "unbounded", "mode": "range"}),
])
def test_over_frames(window, frame):
    graph = plan(f"SELECT id, SUM(n) OVER (PARTITION BY v {window}) AS s FROM a")
    (over,) = nodes(graph, "over_aggregate")
    assert over.config.frame == OverFrame(**frame)
    assert over.config.partition_keys == ("v",) and over.config.time_column == "ts"
    assert [(e.partitioning, e.keys) for e in over.inputs] == [("hash", ("v",))]


def test_several_aggregates_share_a_named_window():
    graph = plan("SELECT *, COUNT(*) OVER w AS c, AVG(n) OVER w AS m, SUM(n) OVER w + 1 FROM a "
                 "WINDOW w AS (ORDER BY ts ROWS 2 PRECEDING)")
    (over,) = nodes(graph, "over_aggregate")
    assert [a.function for a in over.config.aggregates] == ["count", "avg", "sum"]
    assert over.inputs[0].partitioning == "forward"
    assert sink_input(graph).output_schema.names == ["id", "v", "ts", "n", "c", "m", "EXPR$3"]


@pytest.mark.parametrize(("window", "message"), [
    ("ORDER BY n", "an OVER aggregate must be ordered by a time attribute, not `n`"),
    ("ORDER BY ts DESC", "an OVER aggregate must be ordered by its time attribute ascending"),
    ("PARTITION BY v", "an OVER aggregate must be ordered by exactly one time attribute"),
    ("ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING", "an OVER frame must end at CURRENT ROW"),
    ("ORDER BY ts ROWS BETWEEN INTERVAL '1' HOUR PRECEDING AND CURRENT ROW",
     "ROWS frame bound `INTERVAL '1' HOUR` is not a number of rows"),
    ("ORDER BY ts RANGE BETWEEN 5 PRECEDING AND CURRENT ROW", "RANGE frame bound `5` is not an interval"),
])
def test_over_window_errors(window, message):
    query = f"SELECT id, SUM(n) OVER ({window}) AS s FROM a"
    (problem,) = problems(query)
    assert problem.message == message
    assert problem.hint


def test_over_aggregates_must_share_their_window():
    query = "SELECT SUM(n) OVER (ORDER BY ts) AS s, COUNT(*) OVER (PARTITION BY v ORDER BY ts) AS c FROM a"
    (problem,) = problems(query)
    assert problem.message == "all OVER aggregates of a SELECT must use the same window"
    assert (problem.line, problem.col) == at(query, "COUNT(*) OVER")


def test_over_on_an_unwatermarked_column_names_the_time_attributes():
    (problem,) = problems("SELECT SUM(id) OVER (ORDER BY ts) AS s FROM plain")
    assert "must be ordered by a time attribute" in problem.message
    assert "none" in problem.hint


def test_distinct_over_and_rank_mixed_with_over_are_refused():
    (problem,) = problems("SELECT COUNT(DISTINCT n) OVER (ORDER BY ts) AS c FROM a")
    assert problem.message == "COUNT(DISTINCT ...) OVER is not supported"
    (problem,) = problems("SELECT SUM(n) OVER (ORDER BY ts) AS s, ROW_NUMBER() OVER (ORDER BY ts) AS r FROM a")
    assert "cannot be mixed with OVER aggregates" in problem.message


def test_a_query_over_an_over_aggregate_is_not_a_ranking():
    graph = plan("SELECT id FROM (SELECT id, SUM(n) OVER (ORDER BY ts) AS s FROM a) AS t WHERE s > 10")
    assert nodes(graph, "over_aggregate") and not nodes(graph, "window_rank")

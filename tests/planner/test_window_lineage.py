"""Window lineage travels with the planned stream (``Stream.window_columns``): a window bound
keeps being one under any name, through views, CTEs and subqueries, and a column that is no
bound is never taken for one because of its name or its SQL text."""
from __future__ import annotations

from weir.planner.planner import plan_script
from weir.sql import parse

CATALOG = """\
CREATE TABLE bid (auction BIGINT, num BIGINT, ts TIMESTAMP(6), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE VIEW counts AS SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end;
"""


def plan(query: str):
    return plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};")).graph


def kinds(graph) -> list[str]:
    return [n.kind for n in graph.nodes]


def test_a_bound_renamed_through_a_view_a_cte_and_a_subquery_is_still_a_bound():
    graph = plan("""WITH c (a, n, s, e) AS (SELECT * FROM counts)
        SELECT MAX(n) AS maxn, s2, e2 FROM (SELECT n, s AS s2, e AS e2 FROM c WHERE n > 1) AS sub
        GROUP BY s2, e2""")
    assert "group_aggregate" not in kinds(graph)
    first, second = [n for n in graph.nodes if n.kind == "window_aggregate"]
    # the cascade over the HOP's windows: one tumbling window per HOP window end (its slide apart)
    assert second.config.window.size == 2_000_000
    assert second.config.keys == (("_window_start", '"_window_start"'), ("_window_end", '"_window_end"'))
    (sink,) = [n for n in graph.nodes if n.kind == "sink"]
    assert sink.config.changelog is None  # append-only: a window aggregate, not an updating one


def test_a_renamed_bound_joins_as_a_window_through_a_cte():
    graph = plan("""WITH c AS (SELECT auction, num, starttime AS s, endtime AS e FROM counts)
        SELECT l.auction, r.num FROM c AS l JOIN counts AS r
        ON l.s = r.starttime AND l.e = r.endtime AND l.auction = r.auction""")
    (join,) = [n for n in graph.nodes if n.kind == "window_join"]
    assert (join.config.left.window_start, join.config.right.window_start) == ("s", "starttime")
    assert "HOP(ts, 10 s, slide 2 s)" in join.description


def test_a_union_of_a_bound_and_a_plain_column_is_no_bound():
    """The second input's starttime and endtime are its rows' own time, with the same names and the
    same types as the first input's window bounds: the union's columns are no window bounds (every
    input must agree), so GROUP BY them is an updating aggregate, not a cascaded window."""
    graph = plan("""SELECT MAX(num) AS maxn, starttime, endtime FROM (
            SELECT auction, num, starttime, endtime FROM counts
            UNION ALL SELECT auction, num, ts AS starttime, ts AS endtime FROM bid) AS u
        GROUP BY starttime, endtime""")
    assert "group_aggregate" in kinds(graph)
    assert [n.kind for n in graph.nodes].count("window_aggregate") == 1  # only the view's HOP
    (sink,) = [n for n in graph.nodes if n.kind == "sink"]
    assert sink.config.changelog is not None  # an updating result


def test_a_union_whose_inputs_agree_keeps_the_bounds():
    graph = plan("""SELECT MAX(num) AS maxn, starttime, endtime FROM (
            SELECT auction, num, starttime, endtime FROM counts WHERE auction < 10
            UNION ALL SELECT auction, num, starttime, endtime FROM counts WHERE auction >= 10) AS u
        GROUP BY starttime, endtime""")
    assert "group_aggregate" not in kinds(graph)
    hop, cascade = [n for n in graph.nodes if n.kind == "window_aggregate"]
    assert hop.config.window.kind == "hop"  # the view, once: its second use reads the first (sub-plan reuse)
    assert [n for n in graph.nodes if n.kind == "calc" and n.inputs[0].source == hop.id and "reuse" in n.id]
    assert cascade.config.window.time_column == "_window_time"


def test_a_column_named_like_a_bound_is_no_bound():
    """A plain table column called window_start (the SQL text of a window bound) is just a column."""
    catalog_extra = ("CREATE TABLE plain (auction BIGINT, num BIGINT, window_start TIMESTAMP(6), "
                     "window_end TIMESTAMP(6), ts TIMESTAMP(6), WATERMARK FOR ts AS ts) "
                     "WITH ('connector' = 'nexmark', 'table' = 'bid');\n")
    graph = plan_script(parse(CATALOG + catalog_extra + "CREATE MATERIALIZED VIEW v AS SELECT MAX(num) AS m, "
                              "window_start, window_end FROM (SELECT num, window_start, window_end FROM plain) "
                              "GROUP BY window_start, window_end;")).graph
    assert "group_aggregate" in kinds(graph) and "window_aggregate" not in kinds(graph)

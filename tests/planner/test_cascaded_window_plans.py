"""GROUP BY the renamed bounds of a window aggregate: a window aggregate again (Flink keeps the
window properties through renames), so Nexmark q5 joins two append-only windowed inputs."""
from __future__ import annotations

import pytest

from weir.engine.operators.windows import SlicedWindowConfig
from weir.planner.planner import plan_script
from weir.sql import WeirSqlError, parse

CATALOG = """\
CREATE TABLE bid (auction BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'table' = 'bid');
"""
COUNTS = """SELECT auction, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY auction, window_start, window_end"""


def plan(query: str):
    return plan_script(parse(CATALOG + f"CREATE MATERIALIZED VIEW v AS {query};")).graph


def kinds(graph) -> list[str]:
    return [n.kind for n in graph.nodes]


def test_grouping_by_renamed_bounds_is_a_window_aggregate_of_the_same_windows():
    graph = plan(f"SELECT MAX(num) AS maxn, starttime, endtime FROM ({COUNTS}) GROUP BY starttime, endtime")
    assert "group_aggregate" not in kinds(graph)
    first, second = [n for n in graph.nodes if n.kind == "window_aggregate"]
    # one tumbling window per HOP window: its end, 2 s (the slide) after the previous end
    assert second.config.window == SlicedWindowConfig(kind="tumble", time_column="_window_time", size=2_000_000,
                                                                offset=0)
    assert second.config.projection == (("maxn", '"_agg0"'), ("starttime", '"_window_start"'),
                                         ("endtime", '"_window_end"'))
    (sink,) = [n for n in graph.nodes if n.kind == "sink"]
    assert sink.config.changelog is None  # append-only, as in Flink


def test_nexmark_q5_is_a_window_join_that_filters_by_its_other_condition():
    query = f"""SELECT A.auction, A.num FROM ({COUNTS}) AS A
      JOIN (SELECT MAX(num) AS maxn, starttime, endtime FROM ({COUNTS}) GROUP BY starttime, endtime) AS M
      ON A.starttime = M.starttime AND A.endtime = M.endtime AND A.num >= M.maxn"""
    graph = plan(query)
    (join,) = [n for n in graph.nodes if n.kind == "window_join"]
    assert join.config.right.window_start == "starttime"
    assert "HOP(ts, 10 s, slide 2 s)" in join.description
    assert join.config.condition == '"num" >= "maxn"'
    (calc,) = graph.consumers(join.id)
    assert calc[0].config.filter is None


def test_grouping_by_one_bound_only_is_an_updating_aggregate():
    graph = plan(f"SELECT MAX(num) AS maxn, endtime FROM ({COUNTS}) GROUP BY endtime")
    assert "group_aggregate" in kinds(graph)


def test_window_start_of_no_window_table_function_is_an_unknown_column():
    with pytest.raises(WeirSqlError) as raised:
        plan(f"SELECT MAX(num) AS maxn, window_start FROM ({COUNTS}) GROUP BY starttime, endtime")
    assert raised.value.problems[0].message.startswith("unknown column `window_start`")


def test_a_grouped_window_time_stays_a_time_attribute_to_window_again():
    inner = """SELECT auction, COUNT(*) AS num, window_start, window_end, window_time
      FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))
      GROUP BY auction, window_start, window_end, window_time"""
    per_window = f"""SELECT MAX(num) AS top, window_start, window_end, window_time FROM ({inner})
      GROUP BY window_start, window_end, window_time"""
    graph = plan(f"""SELECT SUM(top) AS top, window_start, window_end FROM TABLE(TUMBLE(TABLE ({per_window}),
      DESCRIPTOR(window_time), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end""")
    assert [n.config.window.size for n in graph.nodes if n.kind == "window_aggregate"] == [
        10_000_000, 10_000_000, 60_000_000]

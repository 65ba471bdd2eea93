"""Planning SESSION windows: the session_window node, its keys and hash edge, and the errors."""
from __future__ import annotations

import pytest

from weir.engine.operators.session_window import SessionWindowSpec
from weir.planner.planner import plan_script
from weir.sql import parse
from test_planner_errors import CATALOG, at, problems, the_problem

SESSION = "TABLE(SESSION(TABLE bids PARTITION BY {keys}, DESCRIPTOR(date_time), INTERVAL '5' SECOND))"


def session_node(statements: str):
    script = plan_script(parse(CATALOG + statements))
    [node] = [n for n in script.graph.nodes if n.kind == "session_window"]
    return node


def test_a_session_table_function_plans_to_a_session_window_on_a_hash_edge():
    node = session_node(f"INSERT INTO counts SELECT auction, COUNT(*) FROM {SESSION.format(keys='auction')} "
                        "GROUP BY auction, window_start, window_end")
    assert node.config.window == SessionWindowSpec(kind="session", time_column="date_time", gap=5_000_000)
    assert node.config.keys == (("auction", '"auction"'),)
    assert [(e.partitioning, e.keys) for e in node.inputs] == [("hash", ("auction",))]
    assert node.description.startswith(
        "SessionWindowAggregate(window=[SESSION(date_time, gap 5 s, partitionBy=[auction])]")


def test_the_legacy_group_window_keys_sessions_by_its_group_keys():
    legacy = session_node("INSERT INTO counts SELECT auction, COUNT(*) FROM bids "
                          "GROUP BY SESSION(date_time, INTERVAL '5' SECOND), auction")
    tvf = session_node(f"INSERT INTO counts SELECT auction, COUNT(*) FROM {SESSION.format(keys='auction')} "
                       "GROUP BY auction, window_start, window_end")
    assert legacy.config == tvf.config
    assert legacy.inputs == tvf.inputs


def test_session_start_end_and_rowtime_are_the_window_columns():
    node = session_node(
        "CREATE MATERIALIZED VIEW v AS SELECT auction, SESSION_START(date_time, INTERVAL '5' SECOND) AS s, "
        "SESSION_END(date_time, INTERVAL '5' SECOND) AS e, SESSION_ROWTIME(date_time, INTERVAL '5' SECOND) AS r, "
        "SUM(price) AS total FROM bids GROUP BY SESSION(date_time, INTERVAL '5' SECOND), auction")
    assert node.config.projection[:4] == (("auction", '"auction"'), ("s", '"window_start"'),
                                           ("e", '"window_end"'), ("r", '"window_time"'))


def test_a_partition_column_that_is_not_grouped_is_refused():
    sql = (f"INSERT INTO counts SELECT auction, COUNT(*) FROM {SESSION.format(keys='auction, channel')} "
           "GROUP BY auction, window_start, window_end")
    p = the_problem(sql)
    assert p.message == "SESSION is partitioned by `channel`, which is not a GROUP BY key"
    assert (p.line, p.col) == at(sql, "channel")
    assert p.hint == "add `channel` to GROUP BY: GROUP BY channel, auction, window_start, window_end"


def test_a_group_key_outside_partition_by_and_an_unknown_partition_column_are_reported_together():
    sql = (f"INSERT INTO counts SELECT auction, COUNT(*) FROM {SESSION.format(keys='auctoin')} "
           "GROUP BY auction, window_start, window_end")
    found = problems(sql)
    assert [p.message for p in found] == [
        "unknown column `auctoin` in `bids`",
        "GROUP BY key auction is not in SESSION's PARTITION BY: sessions are formed per PARTITION BY key, "
        "and a further key would split them",
    ]
    assert (found[0].line, found[0].col) == at(sql, "auctoin")
    assert (found[1].line, found[1].col) == at(sql, "auction", after="GROUP BY")


def test_a_session_window_without_aggregation_is_refused():
    sql = f"INSERT INTO counts SELECT auction, price FROM {SESSION.format(keys='auction')}"
    p = the_problem(sql)
    assert p.message.startswith("a SESSION window needs GROUP BY window_start, window_end")
    assert (p.line, p.col) == at(sql, "bids", after="SESSION")


@pytest.mark.parametrize("gap", ["INTERVAL '0' SECOND", "INTERVAL '-1' SECOND"])
def test_a_gap_that_is_not_positive_is_refused(gap):
    sql = (f"INSERT INTO counts SELECT auction, COUNT(*) FROM TABLE(SESSION(TABLE bids PARTITION BY auction, "
           f"DESCRIPTOR(date_time), {gap})) GROUP BY auction, window_start, window_end")
    assert "gap" in the_problem(sql).message

"""Planner errors a person can act on: each names the problem, points at its line
and column, and gives a hint; every problem of a statement is reported together."""
from __future__ import annotations

import pytest

from planner.planner import plan_script
from sql import Problem, WeirSqlError, parse

CATALOG = """\
CREATE TABLE bids (
  auction BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'events' = '100');
CREATE TABLE clicks (user_id BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'nexmark', 'table' = 'bid');
CREATE TABLE counts (auction BIGINT, n BIGINT) WITH ('connector' = 'blackhole');
CREATE VIEW auctions AS SELECT auction FROM bids;
"""
WINDOW = "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND))"


def problems(statements: str) -> list[Problem]:
    with pytest.raises(WeirSqlError) as raised:
        plan_script(parse(CATALOG + statements))
    return raised.value.problems


def the_problem(statements: str) -> Problem:
    found = problems(statements)
    assert len(found) == 1, found
    return found[0]


def at(statements: str, needle: str, after: str = "") -> tuple[int, int]:
    """Line and column of ``needle`` (the first after ``after``) in the statements,
    counted in the whole text as the planner should report them."""
    text = CATALOG + statements
    offset = text.index(needle, len(CATALOG) + statements.index(after))
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def test_unknown_table_lists_the_known_names():
    sql = "INSERT INTO counts SELECT auction, price FROM bidz"
    p = the_problem(sql)
    assert p.message == "unknown table `bidz`"
    assert (p.line, p.col) == at(sql, "bidz")
    assert "did you mean `bids`?" in p.hint and "known: auctions, bids, clicks, counts" in p.hint


def test_unknown_column_suggests_the_closest_name():
    sql = "INSERT INTO counts SELECT auction, prise FROM bids"
    p = the_problem(sql)
    assert p.message == "unknown column `prise` in `bids`"
    assert (p.line, p.col) == at(sql, "prise")
    assert p.hint.startswith("did you mean `price`?")
    assert "auction, price, channel, date_time" in p.hint


def test_window_on_a_column_without_watermark():
    sql = "INSERT INTO counts SELECT user_id, COUNT(*)\nFROM TUMBLE(clicks, ts, INTERVAL '1' MINUTE)\nGROUP BY user_id, window_start, window_end"
    p = the_problem(sql)
    assert p.message == "TUMBLE on `ts` of `clicks`, which is not a time attribute"
    assert (p.line, p.col) == at(sql, "ts, INTERVAL")
    assert "WATERMARK FOR ts AS ts - INTERVAL" in p.hint


def test_group_by_on_an_unbounded_stream_needs_a_window():
    sql = "INSERT INTO counts SELECT auction, COUNT(*) FROM bids\nGROUP BY auction"
    p = the_problem(sql)
    assert "GROUP BY on the unbounded table `bids` needs a window" in p.message
    assert (p.line, p.col) == at(sql, "auction", after="GROUP BY")
    assert "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' MINUTE))" in p.hint


def test_window_aggregate_must_group_by_the_window_bounds():
    sql = f"INSERT INTO counts SELECT auction, COUNT(*) FROM {WINDOW}\nGROUP BY auction"
    p = the_problem(sql)
    assert p.message == "a window aggregate must GROUP BY window_start and window_end"
    assert (p.line, p.col) == at(sql, "auction", after="GROUP BY")
    assert "window_start, window_end" in p.hint


def test_column_neither_grouped_nor_aggregated():
    sql = f"INSERT INTO counts SELECT auction, price FROM {WINDOW}\nGROUP BY auction, window_start, window_end"
    p = the_problem(sql)
    assert p.message == "column `price` is neither grouped nor aggregated"
    assert (p.line, p.col) == at(sql, "price")
    assert "add `price` to GROUP BY" in p.hint and "MAX(price)" in p.hint


def _table_with(options: str) -> str:
    return f"CREATE TABLE t (auction BIGINT, n BIGINT) WITH ({options});\nINSERT INTO counts SELECT auction, n FROM t"


def test_unknown_connector():
    sql = _table_with("'connector' = 'kafkaa'")
    p = the_problem(sql)
    assert p.message.startswith("table `t`: unknown connector 'kafkaa'")
    assert (p.line, p.col) == at(sql, "'connector' = 'kafkaa'")
    assert p.hint  # the known connectors, or the closest one


def test_unknown_format():
    sql = _table_with("'connector' = 'filesystem', 'path' = 'in', 'format' = 'xml'")
    p = the_problem(sql)
    assert p.message == "table `t`: option 'format' must be one of 'csv', 'json', 'parquet', not 'xml'"
    assert (p.line, p.col) == at(sql, "'format'")
    assert "'format' = 'csv'" in p.hint


def test_unknown_option_suggests_the_closest():
    sql = _table_with("'connector' = 'filesystem', 'path' = 'in', 'format' = 'csv', 'csv.field-delimitr' = ';'")
    p = the_problem(sql)
    assert p.message == "table `t`: connector 'filesystem' has no option 'csv.field-delimitr'"
    assert (p.line, p.col) == at(sql, "'csv.field-delimitr'")
    assert p.hint == "did you mean 'csv.field-delimiter'?"


def test_missing_required_option_points_at_the_with_clause():
    sql = _table_with("'connector' = 'filesystem', 'format' = 'csv'")
    p = the_problem(sql)
    assert p.message.startswith("table `t`: connector 'filesystem' needs the option 'path'")
    assert (p.line, p.col) == at(sql, "WITH ('connector' = 'filesystem'")
    assert "add 'path' =" in p.hint


def test_type_mismatch_with_the_sink_names_column_types_and_cast():
    sql = "INSERT INTO counts SELECT auction, UPPER(channel) FROM bids"
    p = the_problem(sql)
    assert p.message == "type mismatch with the sink: column 2 (`EXPR$1`) is VARCHAR but `counts`.`n` is BIGINT"
    assert (p.line, p.col) == at(sql, "UPPER")
    assert p.hint == "CAST it: CAST(UPPER(channel) AS BIGINT)"


def test_wrong_column_count_for_the_sink():
    sql = "INSERT INTO counts SELECT auction FROM bids"
    p = the_problem(sql)
    assert p.message == "INSERT INTO `counts` gives 1 column but the table has 2 columns"
    assert (p.line, p.col) == at(sql, "auction FROM")
    assert p.hint == "the query gives (auction); `counts` has (auction, n)"


def test_unknown_set_key_suggests_the_closest():
    sql = "SET 'parallelism.defualt' = '2'"
    p = the_problem(sql)
    assert p.message == "unknown setting 'parallelism.defualt'"
    assert (p.line, p.col) == at(sql, "'parallelism.defualt'")
    assert p.hint == "did you mean 'parallelism.default'?"


def test_unknown_setting_from_the_command_line():
    with pytest.raises(WeirSqlError) as raised:
        plan_script(parse(CATALOG), settings={"pipeline.nmae": "x"})
    assert raised.value.problems[0].message == "unknown setting 'pipeline.nmae'"
    assert raised.value.problems[0].hint == "did you mean 'pipeline.name'?"


def test_insert_into_a_view():
    sql = "INSERT INTO auctions SELECT auction FROM bids"
    p = the_problem(sql)
    assert p.message == "cannot INSERT INTO `auctions`: it is a view, and a view cannot be written to"
    assert (p.line, p.col) == at(sql, "auctions SELECT")
    assert "tables: bids, clicks, counts" in p.hint


def test_insert_into_an_unknown_table():
    sql = "INSERT INTO countz SELECT auction, price FROM bids"
    p = the_problem(sql)
    assert p.message == "INSERT INTO unknown table `countz`"
    assert (p.line, p.col) == at(sql, "countz")
    assert p.hint.startswith("did you mean `counts`?")


def test_several_problems_in_one_statement_are_reported_together():
    sql = "INSERT INTO counts SELECT auctoin, prise FROM bids WHERE chanel = 'x'"
    found = problems(sql)
    assert [p.message for p in found] == [
        "unknown column `auctoin` in `bids`",
        "unknown column `prise` in `bids`",
        "unknown column `chanel` in `bids`",
    ]
    assert [(p.line, p.col) for p in found] == [at(sql, "auctoin"), at(sql, "prise"), at(sql, "chanel")]
    assert [p.hint.split("?")[0] for p in found] == [
        "did you mean `auction`", "did you mean `price`", "did you mean `channel`"]


def test_several_option_problems_are_reported_together():
    sql = _table_with("'connector' = 'filesystem', 'format' = 'xml', 'pth' = 'in'")
    found = problems(sql)
    assert len(found) == 3
    assert {p.message.split(": ", 1)[1].split(" (")[0] for p in found} == {
        "option 'format' must be one of 'csv', 'json', 'parquet', not 'xml'",
        "connector 'filesystem' has no option 'pth'",
        "connector 'filesystem' needs the option 'path'",
    }
    assert all(p.line and p.col and p.hint for p in found)


def test_window_on_a_non_timestamp_column_points_at_the_time_attribute():
    sql = "INSERT INTO counts SELECT auction, COUNT(*)\nFROM TUMBLE(bids, price, INTERVAL '1' MINUTE)\nGROUP BY auction, window_start, window_end"
    p = the_problem(sql)
    assert p.message == "TUMBLE on `price` of `bids`, which is not a time attribute"
    assert (p.line, p.col) == at(sql, "price, INTERVAL")
    assert p.hint == "window on a column with a watermark: `date_time`"


# -- GROUPING SETS, ROLLUP, CUBE ------------------------------------------------------------


def test_window_bounds_inside_grouping_sets_are_refused():
    sql = (f"CREATE MATERIALIZED VIEW v AS SELECT COUNT(*) FROM {WINDOW}\n"
           "GROUP BY window_end, GROUPING SETS ((window_start, auction), ())")
    p = the_problem(sql)
    assert p.message == "window_start inside GROUPING SETS, ROLLUP or CUBE"
    assert (p.line, p.col) == at(sql, "window_start")
    assert "outside the sets" in p.hint


def test_grouping_of_a_column_that_is_not_a_key():
    sql = (f"CREATE MATERIALIZED VIEW v AS SELECT GROUPING(channel) AS g, COUNT(*) FROM {WINDOW}\n"
           "GROUP BY window_start, window_end, ROLLUP (auction)")
    p = the_problem(sql)
    assert p.message == "GROUPING of `channel`, which is not a GROUP BY key"
    assert (p.line, p.col) == at(sql, "channel")


def test_column_outside_every_set_is_neither_grouped_nor_aggregated():
    sql = (f"CREATE MATERIALIZED VIEW v AS SELECT channel, COUNT(*) FROM {WINDOW}\n"
           "GROUP BY window_start, window_end, CUBE (auction)")
    assert the_problem(sql).message == "column `channel` is neither grouped nor aggregated"


def test_grouping_sets_over_a_session_window_are_refused():
    sql = ("CREATE MATERIALIZED VIEW v AS SELECT auction, COUNT(*)\n"
           "FROM TABLE(SESSION(TABLE bids PARTITION BY auction, DESCRIPTOR(date_time), INTERVAL '10' SECOND))\n"
           "GROUP BY window_start, window_end, ROLLUP (auction)")
    p = the_problem(sql)
    assert p.message == "ROLLUP over a SESSION window is not supported"
    assert (p.line, p.col) == at(sql, "auction", "ROLLUP")  # sqlglot places ROLLUP at its first key
    assert "TUMBLE, HOP or CUMULATE" in p.hint

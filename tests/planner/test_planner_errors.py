"""Planner errors a person can act on: each names the problem, points at its line
and column, and gives a hint; every problem of a statement is reported together."""
from __future__ import annotations

import pytest

from weir.planner.planner import plan_script
from weir.sql import Problem, WeirSqlError, parse

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


CSV_SINK = ("CREATE TABLE counts_csv (auction BIGINT, n BIGINT)\n"
            "WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'csv');\n")


def test_an_append_only_sink_refuses_an_updating_query():
    sql = CSV_SINK + "INSERT INTO counts_csv SELECT auction, COUNT(*) FROM bids\nGROUP BY auction"
    p = the_problem(sql)
    assert p.message.startswith("the table `counts_csv` ('filesystem' connector, format 'csv') is append-only "
                                "and cannot take an updating query")
    assert (p.line, p.col) == at(sql, "counts_csv", after="INSERT")
    assert "'format' = 'debezium-json'" in p.hint and "PRIMARY KEY" in p.hint and "TUMBLE" in p.hint


def test_an_updating_query_plans_into_changelog_sinks():
    script = plan_script(parse(CATALOG + CSV_SINK.replace("'csv'", "'debezium-json'") + """
        CREATE TABLE keyed (auction BIGINT, n BIGINT, PRIMARY KEY (auction) NOT ENFORCED)
        WITH ('connector' = 'duckdb', 'path' = 'r.duckdb', 'table-name' = 'keyed');
        INSERT INTO counts_csv SELECT auction, COUNT(*) FROM bids GROUP BY auction;
        INSERT INTO counts SELECT auction, COUNT(*) FROM bids GROUP BY auction;
        INSERT INTO keyed SELECT auction, COUNT(*) FROM bids GROUP BY auction;
        CREATE MATERIALIZED VIEW v AS SELECT channel, COUNT(*) AS n FROM bids GROUP BY channel;"""))
    sinks = {n.id: n for n in script.graph.nodes if n.kind == "sink"}
    assert sinks["counts_csv.sink"].config.changelog == "retract"
    assert sinks["counts_csv.sink"].output_schema.names == ["auction", "n", "_row_kind"]
    assert sinks["keyed.sink"].config.upsert_key == ("auction",)
    assert sinks["keyed.sink"].config.options["sink.upsert-key"] == '["auction"]'
    assert sinks["v.sink"].config.upsert_key == ("channel",)


def test_a_duckdb_table_without_primary_key_refuses_an_updating_query():
    sql = ("CREATE TABLE plain (auction BIGINT, n BIGINT) WITH ('connector' = 'duckdb', 'path' = 'r.duckdb', "
           "'table-name' = 'plain');\nINSERT INTO plain SELECT auction, COUNT(*) FROM bids GROUP BY auction")
    p = the_problem(sql)
    assert "the DuckDB table `plain` has no PRIMARY KEY" in p.message
    assert p.hint == "declare the key in `plain`: PRIMARY KEY (<the GROUP BY keys>) NOT ENFORCED"


def test_a_materialized_view_without_its_group_keys_is_kept_as_a_multiset():
    sql = "CREATE MATERIALIZED VIEW v AS SELECT n FROM (SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction)"
    graph = plan_script(parse(CATALOG + sql + ";")).graph
    (sink,) = [n for n in graph.nodes if n.kind == "sink"]
    assert sink.config.changelog == "retract" and "sink.upsert-key" not in sink.config.options


def test_a_window_over_an_updating_stream_is_refused():
    sql = ("CREATE VIEW per_auction AS SELECT auction, COUNT(*) AS n, MAX(date_time) AS ts FROM bids "
           "GROUP BY auction;\nINSERT INTO counts SELECT auction, COUNT(*)\n"
           "FROM TABLE(TUMBLE(TABLE per_auction, DESCRIPTOR(ts), INTERVAL '1' MINUTE))\n"
           "GROUP BY auction, window_start, window_end")
    p = the_problem(sql)
    assert p.message.startswith("the window table function TUMBLE over an updating stream (the result of a "
                                "GROUP BY without a window over `bids`) is not supported")
    assert (p.line, p.col) == at(sql, "per_auction", after="INSERT")
    assert "apply the window to the append-only table first" in p.hint


def test_an_updating_stream_has_no_window_bounds_to_join_on():
    sql = ("CREATE VIEW per_auction AS SELECT auction, COUNT(*) AS n FROM bids GROUP BY auction;\n"
           "INSERT INTO counts SELECT L.auction, L.n FROM per_auction AS L JOIN "
           f"(SELECT * FROM {WINDOW}) AS R ON L.window_start = R.window_start AND L.window_end = R.window_end "
           "AND L.auction = R.auction")
    found = problems(sql)
    assert [p.message for p in found] == ["unknown column `window_start` in `L`", "unknown column `window_end` in `L`"]
    assert found[0].hint == "`L` has columns: auction, n"


def test_debezium_json_cannot_be_read():
    sql = ("CREATE TABLE changes (a BIGINT) WITH ('connector' = 'filesystem', 'path' = 'x', "
           "'format' = 'debezium-json');\nINSERT INTO counts SELECT a, a FROM changes")
    p = the_problem(sql)
    assert "format 'debezium-json' can only be written by a sink, not read by a source" in p.message


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
    assert p.message == "table `t`: option 'format' must be one of 'csv', 'json', 'parquet', 'debezium-json', not 'xml'"
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
        "option 'format' must be one of 'csv', 'json', 'parquet', 'debezium-json', not 'xml'",
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


def test_select_distinct_with_aggregates_is_refused():
    p = the_problem("INSERT INTO counts SELECT DISTINCT auction, COUNT(*) FROM bids GROUP BY auction")
    assert p.message == "SELECT DISTINCT with GROUP BY or aggregates is not supported"
    assert p.hint == "the groups are distinct already: drop DISTINCT"


def test_select_distinct_is_a_group_aggregate():
    script = plan_script(parse(CATALOG + "INSERT INTO counts SELECT DISTINCT auction, price FROM bids;"))
    [node] = [n for n in script.graph.nodes if n.kind == "group_aggregate"]
    assert [k for k, _ in node.config.keys] == ["auction", "price"] and node.config.aggregates == ()


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


def test_an_unknown_function_is_found_at_plan_time_with_the_closest_name():
    sql = "INSERT INTO counts SELECT auction, foo_bar(price) FROM bids"
    p = the_problem(sql)
    assert p.message == "unknown function FOO_BAR"  # not DuckDB's "Catalog Error: Scalar Function ..."
    assert (p.line, p.col) == at(sql, "foo_bar")
    p = the_problem("INSERT INTO counts SELECT auction, COUNT(*) FROM bids\nWHERE dateformat(date_time, 'HH') = '10' GROUP BY auction")
    assert p.message == "unknown function DATEFORMAT" and p.hint == "did you mean DATE_FORMAT?"


def test_a_flink_function_weir_lacks_is_named_as_such():
    p = the_problem("INSERT INTO counts SELECT auction, RAND_INTEGER(10) FROM bids")
    assert p.message == "the function RAND_INTEGER is not supported by weir"


def test_an_operator_given_the_wrong_types_is_pointed_at():
    sql = "INSERT INTO counts SELECT auction, price + channel FROM bids"
    p = the_problem(sql)
    assert p.message == "the operator + cannot take BIGINT and VARCHAR: price + channel"
    assert (p.line, p.col) == at(sql, "+")  # the operator, not a column
    assert p.hint == "cast one side to the other's type, e.g. CAST(channel AS BIGINT)"
    assert "Binder Error" not in p.message


def test_a_function_given_the_wrong_types_lists_what_it_takes():
    sql = "INSERT INTO counts SELECT auction, CHAR_LENGTH(price) FROM bids"
    p = the_problem(sql)
    assert p.message.startswith("CHAR_LENGTH cannot take (BIGINT)") and (p.line, p.col) == at(sql, "CHAR_LENGTH")
    assert "VARCHAR" in p.hint


def test_function_problems_of_a_statement_are_reported_together():
    sql = "INSERT INTO counts SELECT foo(auction), price + channel FROM bids WHERE baz(price) > 1"
    found = problems(sql)
    assert [p.message for p in found] == ["unknown function FOO", "the operator + cannot take BIGINT and VARCHAR: price + channel",
                                          "unknown function BAZ"]
    assert [(p.line, p.col) for p in found] == [at(sql, "foo"), at(sql, "+"), at(sql, "baz")]


def test_a_bad_interval_unit_in_a_watermark_is_found_at_plan_time():
    ddl = ("CREATE TABLE late (v BIGINT, ts TIMESTAMP(3),\n"
           "  WATERMARK FOR ts AS ts - INTERVAL '2' SECNDS) WITH ('connector' = 'nexmark', 'table' = 'bid');\n"
           "INSERT INTO counts SELECT v, v FROM late")
    p = the_problem(ddl)
    assert p.message == "unknown interval unit SECNDS in INTERVAL '2' SECNDS"
    assert (p.line, p.col) == at(ddl, "INTERVAL")
    assert "SECOND, MINUTE, HOUR" in p.hint


def test_arithmetic_with_a_string_literal_is_refused_as_flink_refuses_it():
    # DuckDB would cast '2' when a row comes (and fail the job on 'x'); Flink refuses it at once.
    sql = "INSERT INTO counts SELECT auction, price * '2' FROM bids"
    p = the_problem(sql)
    assert p.message == "the operator * cannot take BIGINT and VARCHAR: price * '2'"
    assert (p.line, p.col) == at(sql, "*")
    p = the_problem("INSERT INTO counts SELECT auction, price FROM bids WHERE price - 'x' > 0")
    assert p.message == "the operator - cannot take BIGINT and VARCHAR: price - 'x'"


def test_an_over_aggregate_beside_a_join_is_refused_at_the_join():
    problem = the_problem(
        "INSERT INTO counts SELECT b.auction, SUM(b.price) OVER (PARTITION BY b.auction ORDER BY b.date_time "
        "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM bids b JOIN bids c ON b.auction = c.auction;")
    assert "JOIN with an OVER aggregate" in problem.message
    assert "join in a subquery" in problem.hint

"""Every problem is a WeirSqlError with the line and column of the offending token and a hint."""
import pytest

from weir.sql import WeirSqlError, parse


def error(text: str) -> WeirSqlError:
    with pytest.raises(WeirSqlError) as raised:
        parse(text, "job.sql")
    e = raised.value
    assert e.source_name == "job.sql" and e.text == text
    assert e.hint, "every error says how to fix it"
    assert "\x1b" not in str(e)
    return e


def where(e: WeirSqlError) -> tuple[int, int]:
    return e.line, e.col


def test_syntax_error_points_at_the_token_in_the_whole_text():
    e = error("SELECT 1;\n-- a comment\nSELECT a b c FROM t")
    assert where(e) == (3, 12)
    assert "'c'" in str(e)


def test_plain_sqlglot_failure_on_flink_tvf_is_now_a_missing_parenthesis_error():
    e = error("SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '10' SECOND)")
    assert where(e) == (1, 83)
    assert "expected ')'" in str(e) and "end of the statement" in str(e)
    assert "parenthesis" in e.hint


def test_no_ansi_colour_codes_and_no_raw_parse_error():
    e = error("SELECT * FROM\n  t WHERE (a = 1")
    assert where(e) == (2, 16)
    assert "Line" not in str(e), "sqlglot's own formatted message does not leak"


def test_incomplete_statement():
    e = error("SELECT * FROM t WHERE")
    assert where(e) == (1, 17) and "incomplete" in str(e)


@pytest.mark.parametrize(
    "text, token",
    [("SELECT 1;\nSELECT 'abc", (2, 8)), ("SELECT `a", (1, 8)), ("SELECT 1 /* never closed", (1, 10))],
)
def test_unterminated_string_name_or_comment(text, token):
    e = error(text)
    assert where(e) == token
    assert "unterminated" in str(e)


def test_tumble_without_size_says_what_to_write():
    e = error("SELECT *\nFROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time)))")
    assert where(e) == (2, 12)
    assert str(e.problems[0].message) == "TUMBLE needs a size"
    assert e.hint == "TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' MINUTE))"


@pytest.mark.parametrize(
    "call, missing",
    [
        ("TUMBLE(TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL '1' MINUTE)", "TUMBLE needs its input table"),
        ("TUMBLE(DATA => TABLE t, SIZE => INTERVAL '1' MINUTE)", "TUMBLE needs a time column"),
        ("HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE)", "HOP needs a size"),
        ("CUMULATE(TABLE t, DESCRIPTOR(ts))", "CUMULATE needs a step"),
        ("SESSION(TABLE t, DESCRIPTOR(ts))", "SESSION needs a gap"),
    ],
)
def test_missing_required_arguments(call, missing):
    e = error(f"SELECT * FROM TABLE({call})")
    assert e.problems[0].message == missing
    assert where(e) == (1, 21)
    assert e.hint.startswith("TABLE(")


def test_unknown_named_argument():
    e = error("SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts),\n  WIDTH => INTERVAL '1' MINUTE))")
    assert where(e) == (2, 3)
    assert "WIDTH" in str(e) and "DATA, TIMECOL, SIZE, OFFSET" in e.hint


def test_descriptor_with_two_columns():
    e = error("SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(a, b), INTERVAL '1' MINUTE))")
    assert where(e) == (1, 40)
    assert "exactly one time column" in str(e) and "a, b" in str(e)


@pytest.mark.parametrize(
    "size, message",
    [
        ("10", "the size of TUMBLE must be an interval, got 10"),
        ("'10 seconds'", "the size of TUMBLE must be an interval"),
        ("INTERVAL '1' MONTH", "MONTH has no fixed length"),
        ("INTERVAL '-1' MINUTE", "the size of TUMBLE must be positive"),
    ],
)
def test_size_must_be_a_positive_fixed_interval(size, message):
    e = error(f"SELECT * FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), {size}))")
    assert where(e) == (1, 56)
    assert message in str(e)
    assert "INTERVAL '10' SECOND" in e.hint


def test_argument_order_errors():
    assert "at most 4 arguments" in str(
        error("SELECT * FROM TUMBLE(t, ts, INTERVAL '1' MINUTE, INTERVAL '1' MINUTE, INTERVAL '1' MINUTE)")
    )
    assert "follows a named one" in str(error("SELECT * FROM TABLE(TUMBLE(DATA => TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"))
    twice = error("SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE, SIZE => INTERVAL '2' MINUTE))")
    assert "SIZE twice" in str(twice) and where(twice) == (1, 74)


def test_partition_by_only_for_session():
    e = error("SELECT * FROM TABLE(TUMBLE(TABLE bids PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' MINUTE))")
    assert where(e) == (1, 52) and "PARTITION BY" in str(e)


def test_legacy_auxiliary_with_other_arguments():
    e = error("SELECT k,\n  TUMBLE_START(ts, INTERVAL '2' MINUTE) FROM bids GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), k")
    assert where(e) == (2, 3)
    assert "must repeat the arguments" in str(e)
    assert "TUMBLE_START(ts, INTERVAL" in e.hint and "window_start" in e.hint


def test_legacy_auxiliary_of_another_window_kind():
    e = error("SELECT HOP_START(ts, INTERVAL '1' MINUTE) FROM bids GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)")
    assert where(e) == (1, 8) and e.hint == "use TUMBLE_START"


def test_legacy_auxiliary_without_a_group_window():
    e = error("SELECT TUMBLE_END(ts, INTERVAL '1' MINUTE), COUNT(*) FROM bids GROUP BY k")
    assert where(e) == (1, 8)
    assert "TUMBLE_END needs a TUMBLE window in GROUP BY" in str(e)
    assert "GROUP BY TUMBLE(ts" in e.hint


def test_window_outside_from_and_group_by():
    e = error("SELECT k, TUMBLE(ts, INTERVAL '1' MINUTE) FROM bids")
    assert where(e) == (1, 11) and "belongs in FROM" in str(e)
    d = error("SELECT * FROM bids WHERE x = DESCRIPTOR(ts)")
    assert where(d) == (1, 30) and "argument of a window table function" in str(d)


def test_legacy_window_needs_one_table_and_one_window():
    assert "single table" in str(error("SELECT COUNT(*) FROM a, b GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)"))
    two = error("SELECT 1 FROM t GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), SESSION(ts, INTERVAL '1' MINUTE)")
    assert where(two) == (1, 59) and "one window" in str(two)


@pytest.mark.parametrize(
    "text, kind",
    [
        ("SELECT 1;\n  UPDATE t SET a = 1", "UPDATE"),
        ("DELETE FROM t", "DELETE"),
        ("GRANT ALL ON t TO u", "GRANT"),
        ("SHOW MODULES", "SHOW MODULES"),
        ("CREATE PROCEDURE p AS 'x'", "CREATE PROCEDURE"),
        ("DROP INDEX i", "DROP INDEX"),
    ],
)
def test_unsupported_statements_are_named(text, kind):
    e = error(text)
    assert e.problems[0].message == f"{kind} statements are not supported"
    assert where(e) == ((2, 3) if text.startswith("SELECT 1") else (1, 1))


def test_table_definition_errors():
    assert where(error("CREATE TABLE t (a INT,\n  WATERMARK FOR ts AS ts)")) == (2, 17)
    assert "given twice" in str(error("CREATE TABLE t (a INT) WITH ('k' = 'v', 'k' = 'w')"))
    assert "needs its columns" in str(error("CREATE TABLE t AS SELECT 1"))
    assert "takes no type or constraint" in str(error("CREATE TABLE t (a INT, b INT AS a + 1)"))
    assert "PARTITIONED BY is not supported" in str(error("CREATE TABLE t (a INT, dt STRING) PARTITIONED BY (dt) "
                                                          "WITH ('connector' = 'filesystem')"))


def test_statement_shape_errors():
    assert "needs a query" in str(error("INSERT INTO t VALUES (1)"))
    assert "one 'key' = 'value'" in str(error("SET 'a' = 'b', 'c' = 'd'"))
    stop = error("STOP JOB")
    assert "job id" in str(stop) and "SHOW JOBS" in stop.hint


@pytest.mark.parametrize("operator", [">", "<"])
def test_two_separate_comparison_signs_are_a_syntax_error_not_a_shift(operator):
    # sqlglot reads >> as the tokens > > and would merge them even with a space between.
    e = error(f"SELECT * FROM bids WHERE price {operator} {operator} 10")
    assert where(e) == (1, 34)  # the second sign
    parsed = parse("SELECT * FROM bids WHERE price >> 10")[0].query  # written together it is the shift
    assert parsed.args["where"].this.key == "bitwiserightshift"


def test_an_unknown_first_word_is_named():
    e = error("SELECT 1;\nSELEC auction FROM bids")
    assert where(e) == (2, 1)
    assert e.problems[0].message == "unknown statement keyword 'SELEC'"
    assert e.hint.startswith("did you mean SELECT?")
    assert "MATERIALIZED" not in str(e)


def test_timestampadd_and_timestampdiff_units_are_keywords():
    e = error("SELECT TIMESTAMPADD(SECNDS, 5, date_time) FROM bids")
    assert where(e) == (1, 21)
    assert e.problems[0].message == "TIMESTAMPADD unit 'SECNDS' is unknown"
    assert "SECOND, MINUTE, HOUR, DAY" in e.hint
    query = parse("SELECT TIMESTAMPDIFF(minute, a, b), TIMESTAMPADD(SQL_TSI_HOUR, 1, a) FROM t")[0].query
    diff, add = query.expressions
    assert (diff.args["unit"].name, diff.expression.name, diff.this.name) == ("MINUTE", "a", "b")
    assert (add.args["unit"].name, add.expression.name, add.this.name) == ("HOUR", "1", "a")

"""Flink's functions compute what Flink computes, once rewritten for DuckDB."""
from __future__ import annotations

from datetime import datetime

import duckdb
import pyarrow as pa
import pytest

from planner.expressions import Scope, bind, to_duckdb
from planner.functions import integer_division, java_to_strftime, translate_tree
from sql import parse

SCHEMA = pa.schema([("a", pa.int64()), ("b", pa.int32()), ("x", pa.float64())])

CASES = [
    ("REGEXP_EXTRACT('abc', 'a(b)', 1)", "b"),
    ("REGEXP_EXTRACT('abc', 'a(b)')", "ab"),
    ("REGEXP_EXTRACT('xyz', 'a(b)', 1)", None),  # no match: NULL, as in Flink
    ("REGEXP_EXTRACT('ac', 'a(b?)c', 1)", ""),  # an empty match stays empty
    ("REGEXP_REPLACE('aab', 'a', 'x')", "xxb"),
    ("TO_TIMESTAMP('2024-01-01 10:00:00')", "2024-01-01 10:00:00"),
    ("TO_TIMESTAMP('2024-01-01', 'yyyy-MM-dd')", "2024-01-01 00:00:00"),
    ("TO_DATE('2024-01-02')", "2024-01-02"),
    ("DATE_FORMAT(TIMESTAMP '2024-01-02 03:04:05', 'yyyy-MM-dd HH:mm:ss')", "2024-01-02 03:04:05"),
    ("7 / 2", 3),
    ("-7 / 2", -3),
    ("(7 / 2) / 2", 1),
    ("7.0 / 2", 3.5),
    ("7 / 2.0", 3.5),
    ("MOD(7, 3)", 1),
    ("SPLIT_INDEX('a,b,c', ',', 1)", "b"),
    ("SPLIT_INDEX('a,b,c', ',', 5)", None),
    ("FLOOR(TIMESTAMP '2024-01-02 03:04:05' TO HOUR)", "2024-01-02 03:00:00"),
    ("CEIL(TIMESTAMP '2024-01-02 03:04:05' TO HOUR)", "2024-01-02 04:00:00"),
    ("CEIL(TIMESTAMP '2024-01-02 03:00:00' TO HOUR)", "2024-01-02 03:00:00"),
    ("TIMESTAMPADD(HOUR, 1, TIMESTAMP '2024-01-02 03:04:05')", "2024-01-02 04:04:05"),
    ("TIMESTAMPDIFF(SECOND, TIMESTAMP '2024-01-02 03:04:05', TIMESTAMP '2024-01-02 03:05:05')", 60),
    ("TIMESTAMPDIFF(MINUTE, TIMESTAMP '2024-01-02 03:04:05', TIMESTAMP '2024-01-02 03:06:04')", 1),
    ("FROM_UNIXTIME(0)", "1970-01-01 00:00:00"),
    ("UNIX_TIMESTAMP('1970-01-01 00:00:10')", 10),
    ("CHAR_LENGTH('abc')", 3),
    ("SUBSTRING('hello', 2, 3)", "ell"),
    ("CAST(12 AS STRING)", "12"),
    ("IF(1 > 0, 'x', 'y')", "x"),
    ("EXTRACT(HOUR FROM TIMESTAMP '2024-01-02 03:04:05')", 3),
    # Flink 2.3's answers (DateTimeUtils, SqlFunctionUtils, java.lang.String):
    ("DAYOFWEEK(DATE '2024-01-07')", 1),  # a Sunday: 1 = Sunday .. 7 = Saturday
    ("DAYOFWEEK(TIMESTAMP '2024-01-13 10:00:00')", 7),  # a Saturday
    ("EXTRACT(DOW FROM DATE '2024-01-07')", 1),
    ("EXTRACT(MILLISECOND FROM TIMESTAMP '2024-01-01 00:00:02.050')", 50),  # within the second, not 2050
    ("EXTRACT(MICROSECOND FROM TIMESTAMP '2024-01-01 00:00:02.050123')", 50123),
    ("EXTRACT(NANOSECOND FROM TIMESTAMP '2024-01-01 00:00:02.050123')", 50123000),
    ("EXTRACT(SECOND FROM TIMESTAMP '2024-01-01 00:00:02.050')", 2),
    ("EXTRACT(EPOCH FROM TIMESTAMP '1970-01-01 00:00:10.500')", 10),
    ("CONCAT('a', CAST(NULL AS STRING), 'b')", None),  # NULL in, NULL out
    ("CONCAT('a', 'b', 'c')", "abc"),
    ("CONCAT_WS('-', 'a', CAST(NULL AS STRING), 'b')", "a-b"),  # CONCAT_WS skips NULLs
    ("UPPER('straße')", "STRASSE"),
    ("DATE_FORMAT(TIMESTAMP '2024-01-01 00:00:00', 'yyyy-MM-dd''T''HH:mm:ss')", "2024-01-01T00:00:00"),
    ("DATE_FORMAT(TIMESTAMP '2024-03-05 14:07:09', 'MMM d, h:mm a')", "Mar 5, 2:07 PM"),
    ("DATE_FORMAT(TIMESTAMP '2024-03-05 04:07:09', 'MMMM dd yy, hh H m s')", "March 05 24, 04 4 7 9"),
    ("DATE_FORMAT(TIMESTAMP '2024-03-05 04:07:09', 'E EEE EEEE')", "Tue Tue Tuesday"),
    ("DATE_FORMAT(TIMESTAMP '2024-01-05 00:00:00', 'D DD DDD y M')", "5 05 005 2024 1"),
    ("DATE_FORMAT(TIMESTAMP '2024-01-01 00:00:02.050123', 'ss.S ss.SS ss.SSS ss.SSSS ss.SSSSSS')",
     "02.0 02.05 02.050 02.0501 02.050123"),
    ("DATE_FORMAT(TIMESTAMP '2024-01-01 09:00:00', 'HH ''o''''clock'' 100%')", "09 o'clock 100%"),
    ("TO_TIMESTAMP('05/01/2024 10:30', 'dd/MM/yyyy HH:mm')", "2024-01-05 10:30:00"),
    ("TO_TIMESTAMP('not a time')", None),  # Flink: NULL
    ("UNIX_TIMESTAMP('1970-01-01 00:01', 'yyyy-MM-dd HH:mm')", 60),
    ("TIMESTAMPADD(SECOND, 5, TIMESTAMP '2024-01-02 03:04:05')", "2024-01-02 03:04:10"),
    ("TIMESTAMPADD(WEEK, 1, TIMESTAMP '2024-01-02 03:04:05')", "2024-01-09 03:04:05"),
    ("TIMESTAMPDIFF(DAY, TIMESTAMP '2024-01-02 03:04:05', TIMESTAMP '2024-01-01 03:04:05')", -1),
    ("CAST(-94.7 AS BIGINT)", -94),  # Flink truncates toward zero; DuckDB alone rounds to -95
    ("CAST(94.7 AS INT)", 94),
    ("TRY_CAST(-94.7 AS INT)", -94),
    ("CAST(CAST(-94.7 AS DOUBLE) AS SMALLINT)", -94),
    ("ROUND(41.05, 1)", "41.1"),  # half up on the decimal value
    ("ROUND(CAST(41.05 AS DOUBLE), 1)", 41.1),  # a DOUBLE too, as BigDecimal.valueOf rounds it
    ("ROUND(CAST(-2.5 AS DOUBLE), 0)", -3.0),
    ("ROUND(CAST(1.005 AS DOUBLE), 2)", 1.01),
    ("ROUND(-2.5)", -3),
]


def evaluate(sql_text: str):
    expression = parse(f"SELECT {sql_text} AS v FROM t")[0].query.expressions[0].this
    tree = integer_division(translate_tree(expression), SCHEMA)
    return duckdb.sql(f"SELECT {tree.sql(dialect='duckdb')}").fetchall()[0][0]


@pytest.mark.parametrize(("flink", "expected"), CASES, ids=[c[0] for c in CASES])
def test_function_gives_flinks_result(flink, expected):
    got = evaluate(flink)
    assert (got is None and expected is None) or str(got) == str(expected)


def test_integer_division_uses_the_column_types():
    expression = parse("SELECT a / b, a / x FROM t")[0].query
    int_div, float_div = (integer_division(e.copy(), SCHEMA).sql(dialect="duckdb") for e in expression.expressions)
    assert int_div == "a // b"
    assert float_div == "a / x"


def test_java_patterns_become_strftime():
    assert java_to_strftime("yyyy-MM-dd HH:mm:ss.SSS") == "%Y-%m-%d %H:%M:%S.%g"
    assert java_to_strftime("100%") == "100%%"


COLUMNS = pa.table({"n": pa.array([7, None], pa.int64()), "x": [-94.7, 41.05], "s": ["straße", None],
                    "ts": pa.array([datetime(2024, 1, 7, 15, 4, 2, 50000), None], pa.timestamp("us"))})


def over_columns(select_list: str) -> tuple[pa.Schema, list[tuple]]:
    """The select list bound to ``COLUMNS`` and translated as the planner does: its types and rows."""
    problems: list = []
    scope = Scope(COLUMNS.schema, "t")
    items = parse(f"SELECT {select_list} FROM t")[0].query.expressions
    sql = ", ".join(f"{to_duckdb(bind(item.unalias(), scope, problems), COLUMNS.schema)} AS c{i}"
                    for i, item in enumerate(items))
    assert problems == []
    con = duckdb.connect()
    con.register("input_batch", COLUMNS)
    result = con.sql(f"SELECT {sql} FROM input_batch").to_arrow_table()
    return result.schema, [tuple(row.values()) for row in result.to_pylist()]


def test_timestampadd_and_timestampdiff_take_a_unit_keyword_over_columns():
    _, rows = over_columns("TIMESTAMPADD(SECOND, 5, ts), TIMESTAMPDIFF(MINUTE, ts, TIMESTAMPADD(HOUR, 1, ts)), "
                           "TIMESTAMPADD(DAY, CAST(n AS INT), ts)")
    assert rows == [(datetime(2024, 1, 7, 15, 4, 7, 50000), 60, datetime(2024, 1, 14, 15, 4, 2, 50000)),
                    (None, None, None)]


def test_column_functions_give_flinks_answers():
    _, rows = over_columns("CAST(x AS BIGINT), TRY_CAST(x AS INT), ROUND(x, 1), DAYOFWEEK(ts), "
                           "EXTRACT(MILLISECOND FROM ts), CONCAT(s, '!'), UPPER(s), DATE_FORMAT(ts, 'EEE d MMM ''''yy')")
    assert rows == [(-94, -94, -94.7, 1, 50, "straße!", "STRASSE", "Sun 7 Jan '24"),
                    (41, 41, 41.1, None, None, None, None, None)]


def test_result_types_are_flinks():
    schema, _ = over_columns("3.0, 41.05, CHAR_LENGTH(s), TIMESTAMPDIFF(SECOND, ts, ts), CAST(x AS BIGINT), ROUND(x, 1)")
    assert schema.types == [pa.decimal128(2, 1), pa.decimal128(4, 2), pa.int32(), pa.int32(), pa.int64(), pa.float64()]


@pytest.mark.parametrize(("pattern", "named"), [("yyyy-MM-dd Q", "letter 'Q'"), ("yyyy-ww", "letter 'w'"),
                                                ("MMMMM", "'M' repeated 5 times"), ("''open", "not closed")])
def test_a_pattern_weir_cannot_translate_is_refused_at_plan_time(pattern, named):
    problems: list = []
    expression = parse(f"SELECT DATE_FORMAT(ts, '{pattern}') FROM t")[0].query.expressions[0]
    bind(expression, Scope(COLUMNS.schema, "t"), problems)
    assert len(problems) == 1 and named in problems[0].message
    assert (problems[0].line, problems[0].col) == (1, 24)  # the pattern
    assert "MMM" in problems[0].hint

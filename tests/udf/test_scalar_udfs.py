"""Python scalar UDFs in every place SQL takes an expression, each job's output compared with the
same job written with built-in functions; CREATE/DROP FUNCTION; the errors a user can act on.

The UDFs live in ``udf_functions`` (this folder), which worker processes import by name.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import weir
from weir.engine import udfs
from weir.engine.errors import EngineError
from weir.engine.graph import JobGraph
from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.catalog import Catalog, register_function
from weir.planner.planner import plan_script
from weir.sql import parse
from weir.sql.errors import WeirSqlError

import udf_functions

FUNCTIONS = """
CREATE FUNCTION twice AS 'udf_functions.twice' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION shout AS 'udf_functions.shout';
CREATE TEMPORARY SYSTEM FUNCTION IF NOT EXISTS bucket AS 'udf_functions.bucket' LANGUAGE PYTHON;
CREATE FUNCTION is_even AS 'udf_functions.is_even';
"""
TABLES = """
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
CREATE TABLE others (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
"""
WINDOW = "TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))"

#: (query with UDFs, the same query with built-in functions)
QUERIES = {
    "projection and WHERE": ("SELECT shout(k) AS s, twice(v) AS d FROM events WHERE is_even(v)",
                             "SELECT upper(k) || '!' AS s, v * 2 AS d FROM events WHERE v % 2 = 0"),
    "GROUP BY key": ("SELECT bucket(v) AS b, COUNT(*) AS c, SUM(twice(v)) AS s FROM events GROUP BY bucket(v)",
                     "SELECT v / 10 AS b, COUNT(*) AS c, SUM(v * 2) AS s FROM events GROUP BY v / 10"),
    "window": (f"SELECT bucket(v) AS b, window_start, SUM(twice(v)) AS s FROM {WINDOW} "
               "GROUP BY bucket(v), window_start, window_end",
               f"SELECT v / 10 AS b, window_start, SUM(v * 2) AS s FROM {WINDOW} "
               "GROUP BY v / 10, window_start, window_end"),
    "OVER": ("SELECT k, v, SUM(twice(v)) OVER (PARTITION BY k ORDER BY ts "
             "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS s FROM events",
             "SELECT k, v, SUM(v * 2) OVER (PARTITION BY k ORDER BY ts "
             "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS s FROM events"),
    "join condition": ("SELECT a.k, a.v AS av, b.v AS bv FROM events a JOIN others b ON twice(a.v) = b.v",
                       "SELECT a.k, a.v AS av, b.v AS bv FROM events a JOIN others b ON a.v * 2 = b.v"),
    "interval join condition": (
        "SELECT a.k, a.v AS av, b.v AS bv FROM events a JOIN others b ON a.k = b.k AND twice(a.v) = b.v "
        "AND a.ts BETWEEN b.ts - INTERVAL '1' MINUTE AND b.ts",
        "SELECT a.k, a.v AS av, b.v AS bv FROM events a JOIN others b ON a.k = b.k AND a.v * 2 = b.v "
        "AND a.ts BETWEEN b.ts - INTERVAL '1' MINUTE AND b.ts"),
}


def write_events(path: Path, n: int = 24) -> Path:
    path.write_text("ts,k,v\n" + "".join(f"2024-01-01 00:00:{2 * i:02d},{'abc'[i % 3]},{i}\n" for i in range(n)))
    return path


def view_rows(tmp: Path, query: str, name: str, **job_settings: str) -> list[tuple]:
    """The rows of ``CREATE MATERIALIZED VIEW mv AS query`` after a run over the events file."""
    sql = FUNCTIONS + TABLES.format(data=tmp / "events.csv") + f"CREATE MATERIALIZED VIEW mv AS {query};"
    db = tmp / f"{name}.duckdb"
    graph = plan_script(parse(sql), db_path=str(db), settings=job_settings).graph
    run_job(graph, JobOptions(state_dir=tmp / f"state-{name}"))
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql("SELECT * FROM mv ORDER BY ALL").fetchall()


@pytest.mark.parametrize("case", list(QUERIES))
def test_a_udf_gives_what_the_same_builtin_expression_gives(tmp_path, case):
    write_events(tmp_path / "events.csv")
    with_udfs, builtin = QUERIES[case]
    rows = view_rows(tmp_path, with_udfs, "udf")
    assert rows and rows == view_rows(tmp_path, builtin, "builtin")


@pytest.mark.parametrize("case", ["join condition", "window"])
def test_at_parallelism_2_a_udf_gives_what_the_builtin_gives_at_1(tmp_path, case):
    write_events(tmp_path / "events.csv")
    with_udfs, builtin = QUERIES[case]
    rows = view_rows(tmp_path, with_udfs, "udf", **{"parallelism.default": "2"})
    assert rows and rows == view_rows(tmp_path, builtin, "builtin")


@settings(max_examples=8, deadline=None)
@given(values=st.lists(st.one_of(st.none(), st.integers(-10**6, 10**6)), min_size=1, max_size=40),
       batch=st.integers(1, 9))
def test_results_do_not_depend_on_the_batch_size_and_nulls_reach_the_function(tmp_path_factory, values, batch):
    tmp = tmp_path_factory.mktemp("prop")
    rows = "".join(f"2024-01-01 00:00:{i % 60:02d},k{i % 3},{'' if v is None else v}\n" for i, v in enumerate(values))
    (tmp / "events.csv").write_text("ts,k,v\n" + rows)
    query = "SELECT k, twice(v) AS d, bucket(v) AS b, shout(k) AS s FROM events"
    got = view_rows(tmp, query, "p", **{"weir.source.batch-size": str(batch)})
    expected = [(f"k{i % 3}", None if v is None else 2 * v, None if v is None else v // 10, f"K{i % 3}!")
                for i, v in enumerate(values)]
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def test_the_graph_carries_the_functions_its_sql_calls_and_survives_json(tmp_path):
    sql = FUNCTIONS + TABLES.format(data=tmp_path / "e.csv") + \
        "CREATE MATERIALIZED VIEW mv AS SELECT twice(v) AS d FROM events WHERE is_even(v);"
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb")).graph
    assert [f["name"] for f in graph.functions] == ["is_even", "twice"]  # shout and bucket are not called
    assert graph.functions[1] == {"name": "twice", "module": "udf_functions", "qualname": "twice",
                                  "result_type": "BIGINT", "func_type": "arrow", "input_types": None,
                                  "deterministic": True}
    assert JobGraph.from_json(graph.to_json()).functions == graph.functions


def test_a_function_registered_from_python_is_callable_from_sql(tmp_path):
    catalog = Catalog()
    definition = register_function(catalog, lambda v: v + 1, "plus_one", result_type="BIGINT")
    assert definition.spec.result_type == "BIGINT"
    assert duckdb_value("SELECT plus_one(41)") == 42
    with pytest.raises(udfs.UdfError, match="is the name of a built-in function"):
        register_function(catalog, udf_functions.twice, "upper")
    with pytest.raises(udfs.UdfError, match="no result_type"):
        register_function(catalog, udf_functions.plain)


def duckdb_value(sql: str):
    con = duckdb.connect()
    udfs.register_functions(con)
    return con.sql(sql).fetchall()[0][0]


def test_the_decorated_function_stays_callable_in_python():
    assert udf_functions.shout("a") == "A!"
    assert udf_functions.twice(pa.array([1, 2])).to_pylist() == [2, 4]
    assert repr(udf_functions.twice) == "<weir udf twice: arrow -> BIGINT>"


# -- errors ---------------------------------------------------------------------------------------------


def plan_error(sql: str) -> WeirSqlError:
    with pytest.raises(WeirSqlError) as info:
        plan_script(parse(sql))
    return info.value


@pytest.mark.parametrize("target, message, hint", [
    ("no_such_module.f", "cannot import the module 'no_such_module' of the function no_such_module.f",
     "make no_such_module importable"),
    ("udf_functions.nope", "the module 'udf_functions' has no attribute 'nope'", "check the name"),
    ("udf_functions.plain", "udf_functions.plain is not a weir UDF", "@weir.udf(result_type="),
    ("udf_functions.NOT_A_FUNCTION", "is a int, not a weir UDF", "@weir.udf"),
    ("justaname", "'justaname' does not name a module and a function", "my_package.my_module.f"),
])
def test_create_function_refuses_what_it_cannot_import_naming_it(target, message, hint):
    error = plan_error(f"CREATE FUNCTION f AS '{target}' LANGUAGE PYTHON;")
    problem = error.problems[0]
    assert message in problem.message and hint in problem.hint
    assert (problem.line, problem.col) == (1, 22)  # the AS string


def test_create_function_refuses_another_language_a_dotted_name_and_a_second_definition():
    assert "has a catalog or database part" in plan_error("CREATE FUNCTION db.f AS 'a.b';").problems[0].message
    assert "LANGUAGE JAVA is not supported" in plan_error("CREATE FUNCTION f AS 'a.b' LANGUAGE JAVA;").problems[0].message
    twice = "CREATE FUNCTION twice AS 'udf_functions.twice';"
    assert "already exists" in plan_error(twice * 2).problems[0].message
    plan_script(parse(twice + twice.replace("FUNCTION", "FUNCTION IF NOT EXISTS")))


def test_a_dropped_function_is_unknown_again(tmp_path):
    sql = ("CREATE FUNCTION shout2 AS 'udf_functions.shout'; DROP TEMPORARY FUNCTION shout2;"
           + TABLES.format(data=tmp_path / "e.csv") + "CREATE MATERIALIZED VIEW mv AS SELECT shout2(k) FROM events;")
    assert "unknown function SHOUT2" in plan_error(sql).problems[0].message
    assert "unknown function nope" in plan_error("DROP FUNCTION nope;").problems[0].message
    plan_script(parse("DROP FUNCTION IF EXISTS nope;"))


def test_a_call_with_the_wrong_number_of_arguments_is_refused_at_plan_time(tmp_path):
    sql = FUNCTIONS + TABLES.format(data=tmp_path / "e.csv") + \
        "CREATE MATERIALIZED VIEW mv AS SELECT twice(v, v) AS a FROM events;"
    problem = plan_error(sql).problems[0]
    assert problem.message.startswith("twice cannot take 2 argument(s)")
    sql = sql.replace("twice(v, v)", "bucket(v, v)")
    assert plan_error(sql).problems[0].message == "bucket takes 1 argument(s), got 2"


def test_a_declared_parameter_type_is_checked_at_plan_time(tmp_path):
    sql = FUNCTIONS + TABLES.format(data=tmp_path / "e.csv") + \
        "CREATE MATERIALIZED VIEW mv AS SELECT bucket(ts) FROM events;"
    problem = plan_error(sql).problems[0]
    assert "BUCKET cannot take (TIMESTAMP(3))" in problem.message


def test_an_exception_in_a_udf_fails_the_job_naming_the_function_the_row_and_the_traceback(tmp_path):
    write_events(tmp_path / "events.csv")
    sql = ("CREATE FUNCTION inverse_scaled AS 'udf_functions.inverse_scaled';"
           + TABLES.format(data=tmp_path / "events.csv")
           + "CREATE MATERIALIZED VIEW mv AS SELECT k, inverse_scaled(v - 5) AS r FROM events;")
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb")).graph
    with pytest.raises(EngineError) as info:
        run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    error = info.value
    assert error.message == ("the Python function inverse_scaled failed on the row (0): "
                             "ZeroDivisionError: integer division or modulo by zero")
    assert "udf_functions.py" in error.hint and "return 100 // v" in error.hint
    assert error.operator_id == "mv.calc"


def test_an_arrow_udf_returning_the_wrong_length_fails_with_a_clear_error():
    short = weir.udf(lambda v: pa.array([1]), result_type="BIGINT", func_type="arrow", name="short")
    udfs.install(short)
    try:
        con = duckdb.connect()
        udfs.register_functions(con, {"short"})
        with pytest.raises(duckdb.Error):
            con.sql("SELECT short(x) FROM range(5) t(x)").fetchall()
        failure = udfs.take_failure()
        assert failure.engine_error(None).message == "the arrow UDF short returned 1 values for 5 rows"
    finally:
        udfs.uninstall("short")


def test_declarations_weir_cannot_run_are_refused():
    with pytest.raises(udfs.UdfError, match="func_type 'pandas' is not supported") as info:
        weir.udf(lambda v: v, result_type="BIGINT", func_type="pandas")
    assert "func_type='arrow'" in info.value.hint
    with pytest.raises(udfs.UdfError, match="needs a result_type"):
        weir.udf(lambda v: v)
    with pytest.raises(udfs.UdfError, match="'NUMBERZ' is not a SQL type"):
        weir.udf(lambda v: v, result_type="NUMBERZ")
    with pytest.raises(udfs.UdfError, match="takes no argument"):
        weir.udf(lambda: 1, result_type="BIGINT")
    with pytest.raises(udfs.UdfError, match="aggregate functions"):
        weir.udaf(lambda v: v)


def test_a_function_of_main_that_a_worker_cannot_import_is_refused_with_the_fix():
    with pytest.raises(udfs.UdfError) as info:
        udfs.install_specs([udfs.FunctionSpec("f", "__main__", "not_there", "BIGINT").to_json()])
    assert "defined in __main__" in info.value.message and "parallelism 1" in info.value.hint


def test_the_shell_session_creates_and_drops_functions(tmp_path):
    from weir.shell.session import Session

    session = Session(db_path=str(tmp_path / "s.duckdb"))
    created = session.execute(parse("CREATE TEMPORARY FUNCTION shout3 AS 'udf_functions.shout'")[0])
    assert created.text == "created function shout3" and "shout3" in session.catalog.functions
    dropped = session.execute(parse("DROP TEMPORARY FUNCTION shout3")[0])
    assert dropped.text == "dropped function shout3" and "shout3" not in session.catalog.functions


def test_a_udf_in_a_computed_column_and_in_the_watermark(tmp_path):
    write_events(tmp_path / "events.csv", 6)
    sql = (FUNCTIONS + f"""
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, d AS twice(v),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND * bucket(10))
WITH ('connector' = 'filesystem', 'path' = '{tmp_path / "events.csv"}', 'format' = 'csv');
CREATE MATERIALIZED VIEW mv AS SELECT k, window_start, SUM(d) AS s
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '4' SECOND)) GROUP BY k, window_start, window_end;""")
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb")).graph
    run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    with duckdb.connect(str(tmp_path / "v.duckdb"), read_only=True) as con:
        rows = con.sql("SELECT k, second(window_start), s FROM mv ORDER BY ALL").fetchall()
    # rows i = 0..5 at 2i seconds, k = "abc"[i % 3], d = 2i; the 4-second windows hold rows 2j and 2j + 1
    assert rows == [("a", 0, 0), ("a", 4, 6), ("b", 0, 2), ("b", 8, 8), ("c", 4, 4), ("c", 8, 10)]

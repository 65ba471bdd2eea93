"""Python table functions (``@weir.udtf``) and their operator, driven directly with hand-built
batches: both forms against a Python oracle for any split of the input into batches, LEFT JOIN
padding, row kinds carried to every output row; what SQL says about LATERAL TABLE; and every
error a user can act on.

The functions live in ``udtf_functions`` (``tests/support``, on the tests' path), which worker processes
import by name.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import weir
from weir.engine import udtfs
from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.table_function import TableFunctionConfig, TableFunctionOperator
from weir.engine.udfs import UdfError
from weir.engine.watermarks import ARRIVAL_WATERMARK
from weir.planner.errors import PlanError
from weir.planner.planner import explain_text, plan_script
from weir.sql import parse
from weir.sql.errors import WeirSqlError

import udtf_functions

SCHEMA = pa.schema([("k", pa.string()), ("s", pa.string())])
OUTPUT = pa.schema([("k", pa.string()), ("s", pa.string()), ("word", pa.string()), ("n", pa.int64())])


def operator(function, *, outer=False, schema=OUTPUT, passed=("k", "s")) -> TableFunctionOperator:
    """The operator applying ``function`` to ``s``, installed in this process as the planner installs it."""
    udtfs.install(function)
    config = TableFunctionConfig(function=function.spec(), arguments=("s",), passed=passed, columns=("word", "n"),
                                 outer=outer)
    return TableFunctionOperator(config, OperatorContext("words.table_function", schema))


def expected_words(rows: list[tuple], *, outer: bool) -> list[tuple]:
    """The Python oracle: each row's words in order, a row of NULLs for a row without any (outer)."""
    out = []
    for k, s in rows:
        words = [w for w in (s or "").split(" ") if w]
        out.extend((k, s, w, len(w)) for w in words)
        if outer and not words:
            out.append((k, s, None, None))
    return out


def run(op: TableFunctionOperator, batches: list[pa.RecordBatch]) -> list[tuple]:
    out = [b for batch in batches for b in op.process_batch(batch)]
    assert all(b.schema == op.ctx.output_schema for b in out)
    return [tuple(r.values()) for b in out for r in b.to_pylist()]


lines = st.lists(st.tuples(st.sampled_from(["a", "b", None]),
                           st.one_of(st.none(), st.text(alphabet="xy ", max_size=8))), max_size=25)


@settings(max_examples=60, deadline=None)
@given(rows=lines, cuts=st.lists(st.integers(0, 25), max_size=4), outer=st.booleans(),
       form=st.sampled_from(["general", "arrow"]))
def test_both_forms_give_the_oracle_for_any_split_into_batches(rows, cuts, outer, form):
    function = udtf_functions.split_words if form == "general" else udtf_functions.split_words_arrow
    dicts = [{"k": k, "s": s} for k, s in rows]
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    batches = [pa.RecordBatch.from_pylist(dicts[a:b], schema=SCHEMA) for a, b in zip(bounds, bounds[1:])]
    batches.append(pa.RecordBatch.from_pylist([], schema=SCHEMA))  # an empty batch gives nothing
    assert run(operator(function, outer=outer), batches) == expected_words(rows, outer=outer)


def test_every_output_row_carries_its_input_rows_kind_and_arrival_watermark():
    schema = OUTPUT.append(pa.field("_row_kind", pa.int8()))
    op = operator(udtf_functions.split_words, schema=schema, passed=("k", "s", "_row_kind"))
    batch = pa.RecordBatch.from_pydict({"k": ["a", "a", "b"], "s": ["x yy", "x yy zzz", ""],
                                        "_row_kind": pa.array([1, 2, 0], pa.int8()),
                                        ARRIVAL_WATERMARK: pa.array([10, 10, 20], pa.int64())})
    [out] = op.process_batch(batch)
    assert out.schema.names == [*schema.names, ARRIVAL_WATERMARK]
    assert out.to_pydict() == {"k": ["a"] * 5, "s": ["x yy"] * 2 + ["x yy zzz"] * 3,
                               "word": ["x", "yy", "x", "yy", "zzz"], "n": [1, 2, 1, 2, 3],
                               "_row_kind": [1, 1, 2, 2, 2], ARRIVAL_WATERMARK: [10] * 5}


def test_an_arrow_function_may_return_rows_in_any_order_and_they_come_out_by_input_row():
    def backwards(s: pa.Array) -> pa.Table:
        return pa.table({"row": [2, 0, 2, 0], "word": ["c", "a", "d", "b"], "n": [1, 1, 2, 2]})

    op = operator(weir.udtf(backwards, result_types=["STRING", "BIGINT"], func_type="arrow"), outer=True)
    batch = pa.RecordBatch.from_pydict({"k": ["p", "q", "r"], "s": ["", "", ""]})
    assert run(op, [batch]) == [("p", "", "a", 1), ("p", "", "b", 2), ("q", "", None, None),
                                ("r", "", "c", 1), ("r", "", "d", 2)]


def test_one_result_type_takes_bare_values_and_the_decorated_function_stays_callable():
    assert list(udtf_functions.count_to(3)) == [1, 2, 3]
    positions, [column] = udtfs.apply(udtf_functions.count_to, [pa.array([2, None, 1])], 3)
    assert positions.tolist() == [0, 0, 2] and column.to_pylist() == [1, 2, 1]
    assert repr(udtf_functions.split_words) == "<weir udtf split_words: general -> (VARCHAR, BIGINT)>"


# -- SQL ----------------------------------------------------------------------------------------

TABLE = """
CREATE FUNCTION split_words AS 'udtf_functions.split_words' LANGUAGE PYTHON;
CREATE FUNCTION count_to AS 'udtf_functions.count_to';
CREATE FUNCTION too_narrow AS 'udtf_functions.too_narrow';
CREATE FUNCTION inverse AS 'udtf_functions.inverse';
CREATE TABLE lines (ts TIMESTAMP(3), k VARCHAR, s VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
"""


def plan(tmp: Path, query: str):
    return plan_script(parse(TABLE.format(data=tmp / "lines.csv") + f"CREATE MATERIALIZED VIEW mv AS {query};"),
                       db_path=str(tmp / "v.duckdb"))


def plan_error(tmp: Path, query: str):
    with pytest.raises((PlanError, WeirSqlError)) as info:
        plan(tmp, query)
    return info.value.problems[0]


def test_the_three_spellings_plan_one_correlate_and_explain_shows_it(tmp_path):
    nodes = {}
    for spelling in ("lines, LATERAL TABLE(split_words(s)) AS T(word, n)",
                     "lines CROSS JOIN LATERAL TABLE(split_words(s)) AS T(word, n)",
                     "lines JOIN LATERAL TABLE(split_words(s)) T(word, n) ON TRUE",
                     "lines LEFT JOIN LATERAL TABLE(split_words(s)) AS T(word, n) ON TRUE"):
        graph = plan(tmp_path, f"SELECT k, word, n FROM {spelling}").graph
        [node] = [n for n in graph.nodes if n.kind == "table_function"]
        nodes[spelling.split(" ")[1]] = node
    assert {n.config.outer for k, n in nodes.items()} == {False, True}
    assert [n.config.outer for n in nodes.values()] == [False, False, False, True]
    assert all(n.config.function.module == "udtf_functions" for n in nodes.values())
    text = explain_text(plan(tmp_path, "SELECT k, T.word FROM lines LEFT JOIN LATERAL TABLE(split_words(lower(s))) "
                                       "AS T(word, n) ON TRUE"))
    assert ("computes:  Correlate(invocation=[split_words(LOWER(s))], select=[ts, k, s, v, word, n], "
            "joinType=[LEFT])") in text


def test_without_an_alias_the_columns_are_f0_f1_and_an_inner_on_condition_filters(tmp_path):
    graph = plan(tmp_path, "SELECT k, f0, f1 FROM lines, LATERAL TABLE(split_words(s))").graph
    [node] = [n for n in graph.nodes if n.kind == "table_function"]
    assert node.output_schema.names == ["ts", "k", "s", "v", "f0", "f1"]
    graph = plan(tmp_path, "SELECT k, w FROM lines JOIN LATERAL TABLE(split_words(s)) AS T(w, n) ON n > 2").graph
    assert '"n" > 2' in graph.node("mv.calc").config.filter


def test_a_table_function_may_take_a_built_in_functions_name(tmp_path):
    script = plan_script(parse(TABLE.replace("FUNCTION split_words AS", "FUNCTION split AS").format(
        data=tmp_path / "lines.csv") + "CREATE MATERIALIZED VIEW mv AS SELECT k, word FROM lines, "
        "LATERAL TABLE(split(s)) AS T(word, n) WHERE split(s, ' ')[1] = 'x';"), db_path=str(tmp_path / "v.duckdb"))
    assert [n.config.function.name for n in script.graph.nodes if n.kind == "table_function"] == ["split"]
    assert script.graph.functions == []  # no scalar UDF: the scalar split is DuckDB's


@pytest.mark.parametrize(("query", "message", "hint"), [
    ("SELECT k FROM lines, LATERAL TABLE(split_words(s)) AS T(word)",
     "AS T(word) names 1 column(s), but the table function split_words yields 2 (VARCHAR, BIGINT)",
     "name each of its columns: AS T(word, f1)"),
    ("SELECT k FROM lines, LATERAL TABLE(split_words(s, k)) AS T(w, n)",
     "the table function split_words cannot take 2 argument(s): too many positional arguments",
     "call it as split_words(s)"),
    ("SELECT k FROM lines, LATERAL TABLE(splat(s)) AS T(w, n)", "unknown table function splat",
     "known table functions: count_to, inverse, split_words, too_narrow"),
    ("SELECT k FROM lines, LATERAL TABLE(split_words(s)) AS T(k, n)",
     "the table function's column `k` has the name of a column of `lines`", "rename it: AS T(k_, n)"),
    ("SELECT k FROM lines LEFT JOIN LATERAL TABLE(split_words(s)) AS T(w, n) ON n > 1",
     "a LEFT JOIN LATERAL TABLE(...) takes only ON TRUE (as in Flink)", "filter the joined rows in WHERE"),
    ("SELECT k FROM lines RIGHT JOIN LATERAL TABLE(split_words(s)) AS T(w, n) ON TRUE",
     "a RIGHT JOIN LATERAL TABLE(...) is not supported (nor in Flink)", "LEFT JOIN LATERAL TABLE(...) ON TRUE"),
    ("SELECT a.k FROM lines a JOIN lines b ON a.k = b.k, LATERAL TABLE(split_words(a.s)) AS T(w, n)",
     "a LATERAL TABLE join and another join in one SELECT are not supported yet", "join in a subquery first"),
    ("SELECT k FROM lines, LATERAL TABLE(split_words(nope)) AS T(w, n)", "unknown column `nope` in `lines`",
     "`lines` has columns: ts, k, s, v"),
])
def test_plan_time_errors_name_the_problem_and_the_fix(tmp_path, query, message, hint):
    problem = plan_error(tmp_path, query)
    assert problem.message == message
    assert hint in problem.hint
    assert problem.line is not None


def test_a_dropped_table_function_is_unknown_again(tmp_path):
    sql = (TABLE.format(data=tmp_path / "lines.csv") + "DROP TEMPORARY FUNCTION split_words;"
           + "CREATE MATERIALIZED VIEW mv AS SELECT k FROM lines, LATERAL TABLE(split_words(s)) AS T(w, n);")
    with pytest.raises(PlanError) as info:
        plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb"))
    assert info.value.problems[0].message == "unknown table function split_words"
    assert "known table functions: count_to, inverse, too_narrow" in info.value.problems[0].hint


def test_a_scalar_function_in_lateral_table_is_refused(tmp_path):
    sql = ("CREATE FUNCTION shout AS 'udf_functions.shout';" + TABLE.format(data=tmp_path / "lines.csv")
           + "CREATE MATERIALIZED VIEW mv AS SELECT k FROM lines, LATERAL TABLE(shout(s)) AS T(x);")
    with pytest.raises(PlanError) as info:
        plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb"))
    assert info.value.problems[0].message == "shout is a scalar function; LATERAL TABLE(...) calls a table function"
    assert "@weir.udtf" in info.value.problems[0].hint


def test_create_function_takes_a_table_function_and_refuses_a_plain_one_as_for_scalar_udfs():
    assert udtfs.load("udtf_functions.split_words") is udtf_functions.split_words
    with pytest.raises(UdfError, match="udf_functions.plain is not a weir UDF"):
        udtfs.load("udf_functions.plain")


# -- errors at run time -----------------------------------------------------------------------------


def test_an_exception_fails_naming_the_function_the_row_and_the_traceback():
    config = TableFunctionConfig(function=udtf_functions.inverse.spec(), arguments=("v",), passed=("v",),
                                 columns=("r",))
    op = TableFunctionOperator(config, OperatorContext("mv.table_function",
                                                       pa.schema([("v", pa.int64()), ("r", pa.int64())])))
    with pytest.raises(EngineError) as info:
        op.process_batch(pa.RecordBatch.from_pydict({"v": pa.array([5, 0, 4], pa.int64())}))
    error = info.value
    assert error.message == ("the Python function inverse failed on the row (0): "
                             "ZeroDivisionError: integer division or modulo by zero")
    assert "udtf_functions.py" in error.hint and "yield 100 // v" in error.hint
    assert error.operator_id == "mv.table_function"


def test_an_arrow_function_that_raises_is_narrowed_to_its_first_failing_row():
    def fails_on_b(s: pa.Array) -> pa.Table:
        if "b" in s.to_pylist():
            raise ValueError("no b")
        return pa.table({"row": pa.array([], pa.int64()), "word": pa.array([], pa.string()),
                         "n": pa.array([], pa.int64())})

    op = operator(weir.udtf(fails_on_b, result_types=["STRING", "BIGINT"], func_type="arrow"))
    with pytest.raises(EngineError) as info:
        op.process_batch(pa.RecordBatch.from_pydict({"k": ["p", "q"], "s": ["a", "b"]}))
    assert info.value.message == "the Python function fails_on_b failed on the row ('b'): ValueError: no b"


@pytest.mark.parametrize(("function", "message", "hint"), [
    (udtf_functions.too_narrow, "the table function too_narrow yielded ('x y',), not a row of 2 values",
     "yield a tuple of 2 values per row, or change result_types"),
    (weir.udtf(lambda s: [("a", "not a number")], result_types=["STRING", "BIGINT"], name="wrong_type"),
     "the table function wrong_type returned 'not a number' as f1, not a BIGINT", "in column f1"),
    (weir.udtf(lambda s: pa.table({"word": ["a"], "n": [1]}), result_types=["STRING", "BIGINT"], func_type="arrow",
               name="no_index"),
     "the arrow table function no_index returned 2 columns (word, n), not 3", "return the input row index, then"),
    (weir.udtf(lambda s: pa.table({"row": [7], "w": ["a"], "n": [1]}), result_types=["STRING", "BIGINT"],
               func_type="arrow", name="far"),
     "the arrow table function far returned the row index 7 for a chunk of 1 rows", "row indices are 0 to 0"),
    (weir.udtf(lambda s: [1, 2], result_types=["STRING", "BIGINT"], func_type="arrow", name="listy"),
     "the arrow table function listy returned a list, not a table", "list_parent_indices"),
])
def test_output_of_the_wrong_shape_fails_with_the_fix(function, message, hint):
    with pytest.raises(EngineError) as info:
        operator(function).process_batch(pa.RecordBatch.from_pydict({"k": ["p"], "s": ["x y"]}))
    assert info.value.message.startswith(message)
    assert hint in info.value.hint


def test_declarations_weir_cannot_run_are_refused():
    with pytest.raises(UdfError, match="needs result_types"):
        weir.udtf(lambda s: s)
    with pytest.raises(UdfError, match="func_type 'pandas' is not supported") as info:
        weir.udtf(lambda s: s, result_types=["STRING"], func_type="pandas")
    assert "func_type='arrow'" in info.value.hint
    with pytest.raises(UdfError, match="'NUMBERZ' is not a SQL type"):
        weir.udtf(lambda s: s, result_types=["NUMBERZ"])


def test_a_worker_refuses_a_function_that_changed_since_planning():
    spec = udtfs.TableFunctionSpec("split_words", "udtf_functions", "split_words", ("VARCHAR",))
    with pytest.raises(UdfError, match="changed since the job was planned"):
        udtfs.function_for(spec)


@weir.udtf(result_types=["STRING", "BIGINT"])
def words_in_shapes(s):
    """split_words, but a row's words as a list of lists when it has an odd number of them, and None
    (no output) for NULL: rows pyarrow's struct conversion does not take."""
    if s is None:
        return None
    words = [w for w in s.split(" ") if w]
    return [[w, len(w)] for w in words] if len(words) % 2 else [(w, len(w)) for w in words]


@settings(max_examples=40, deadline=None)
@given(rows=lines, batch=st.integers(1, 9))
def test_the_general_forms_fast_path_and_its_fallback_give_the_same_rows(rows, batch):
    """Tuples go through one struct conversion (``udtfs._struct_rows``: never the per-row lists
    of ``_rows_of``); a batch holding a list row or a None falls back to ``_rows_of``: both give the oracle."""
    dicts = [{"k": k, "s": s} for k, s in rows]
    table = pa.Table.from_pylist(dicts, schema=SCHEMA)
    batches = table.to_batches(max_chunksize=batch)
    assert run(operator(words_in_shapes), batches) == expected_words(rows, outer=False)
    rows_of = udtfs._rows_of
    udtfs._rows_of = lambda *a: pytest.fail("the fast path fell back")
    try:
        assert run(operator(udtf_functions.split_words), batches) == expected_words(rows, outer=False)
    finally:
        udtfs._rows_of = rows_of

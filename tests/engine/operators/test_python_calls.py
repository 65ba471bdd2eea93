"""Python UDF calls split out of a calc (``engine.operators.python_calls``): the calc's output is
DuckDB's over the same statement (which calls the functions itself, per vector, unsplit) whatever
the data and batch sizes; a call SQL would not make on a row is not made; a deterministic call
written twice is made once per row; a failure names the function and row as DuckDB's call does."""
from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings, strategies as st

import weir
from weir.engine import udfs
from weir.engine.errors import EngineError
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.calc import INPUT_VIEW, Calc
from weir.engine.operators.duckdb_sql import query_arrow

#: The arguments each function was called with, by function name.
SEEN: dict[str, list] = {}


@weir.udf(result_type="BIGINT", func_type="arrow")
def twice(x: pa.Array) -> pa.Array:
    SEEN.setdefault("twice", []).extend(x.to_pylist())
    return pc.multiply(x, pa.scalar(2, x.type))


@weir.udf(result_type="BIGINT")
def shifted(x):
    SEEN.setdefault("shifted", []).append(x)
    return None if x is None else x + 3


@weir.udf(result_type="BIGINT", input_types=["BIGINT"])
def tens(x):
    return None if x is None else x // 10


@weir.udf(result_type="STRING")
def label(s, n):
    return None if s is None else f"{s}:{n}"


@weir.udf(result_type="BIGINT")
def reciprocal(x):
    """Raises on 0 and NULL: SQL that guards it must keep such rows from it."""
    SEEN.setdefault("reciprocal", []).append(x)
    return 1000 // x


@weir.udf(result_type="BIGINT", deterministic=False)
def drawn(x):
    SEEN.setdefault("drawn", []).append(x)
    return 0 if x is None else x % 7


SCHEMA = pa.schema([("x", pa.int64()), ("s", pa.string())])

#: (projection, filter), each evaluated split and by DuckDB alone.
CALCS = [
    ([["x", "x"], ["y", "twice(x)"]], "twice(x) % 3 = 1"),
    ([["y", "shifted(twice(x)) + 1"], ["z", "tens(shifted(X))"]], None),
    ([["y", "twice(x) * twice(x)"], ["l", "label(s, tens(x + 5))"]], "x IS NOT NULL AND shifted(x) > 4"),
    ([["y", "CASE WHEN x > 2 THEN twice(x) ELSE shifted(x) END"], ["z", "coalesce(tens(x), -1)"],
      ["w", "twice(x) + 1"]],
     "x > 0 OR shifted(x) % 2 = 0"),
    ([["y", "calc_input.x"], ["z", "CAST(twice(calc_input.x) AS DOUBLE) / 2"]], "NOT (tens(x) = 1) AND s <> 'b'"),
]


def functions_scope():
    registry = udfs.FunctionRegistry()
    with udfs.scope(registry):
        for function in (twice, shifted, tens, label, reciprocal, drawn):
            udfs.install(function)
    return registry


def make_calc(projection, filter=None, schema=None) -> Calc:
    out = schema or pa.schema([(name, pa.int64()) for name, _ in projection])
    op = Calc({"projection": projection, "filter": filter}, OperatorContext("calc", out))
    op.open()
    return op


def rows_of(n: int, seed: int) -> pa.RecordBatch:
    values = [None if (i * 7 + seed) % 11 == 0 else (i * 13 + seed) % 50 - 10 for i in range(n)]
    return pa.record_batch([pa.array(values, pa.int64()), pa.array(["abc"[(v or 0) % 3] for v in values])],
                           schema=SCHEMA)


def run_split(op: Calc, batch: pa.RecordBatch, sizes: list[int]) -> list[dict]:
    out, start = [], 0
    for size in [*sizes, batch.num_rows]:
        part = batch.slice(start, size)
        start += part.num_rows
        out += [row for b in op.process_batch(part) for row in b.to_pylist()] if part.num_rows else []
    return out


def duckdb_alone(projection, filter, batch: pa.RecordBatch) -> list[dict]:
    """The statement over the whole batch with DuckDB calling the functions itself."""
    con = duckdb.connect()
    udfs.register_functions(con)
    con.register(INPUT_VIEW, batch)
    where = f" WHERE {filter}" if filter else ""
    sql = f"SELECT {', '.join(f'{s} AS {n}' for n, s in projection)} FROM {INPUT_VIEW}{where}"
    return query_arrow(con, sql, "oracle").to_pylist()


@settings(max_examples=40, deadline=None)
@given(case=st.integers(0, len(CALCS) - 1), n=st.integers(0, 300), seed=st.integers(0, 10),
       sizes=st.lists(st.integers(1, 120), max_size=4))
def test_split_evaluation_equals_duckdb_evaluating_the_calls(case, n, seed, sizes):
    projection, filter = CALCS[case]
    with udfs.scope(functions_scope()):
        types = {"l": pa.string(), "z": pa.float64() if case == 4 else pa.int64()}
        op = make_calc(projection, filter, pa.schema([(name, types.get(name, pa.int64())) for name, _ in projection]))
        assert op._splits[op.query] is not None  # every case has a call to split out
        batch = rows_of(n, seed)
        got = run_split(op, batch, sizes)
        assert got == duckdb_alone(projection, filter, batch)


def test_a_deterministic_call_in_select_and_where_is_made_once_per_row():
    SEEN.clear()
    with udfs.scope(functions_scope()):
        op = make_calc([["x", "x"], ["y", "shifted(x)"], ["z", "shifted(x) * 2"]], "shifted(x) % 2 = 0")
        batch = rows_of(5000, 1)
        out = op.process_batch(batch)
    assert SEEN["shifted"] == batch.column("x").to_pylist()  # each row once, in order
    assert sum(b.num_rows for b in out) > 0


def test_a_non_deterministic_function_is_called_once_per_row_per_call_site():
    SEEN.clear()
    with udfs.scope(functions_scope()):
        op = make_calc([["a", "drawn(x)"], ["b", "drawn(x)"]])
        op.process_batch(rows_of(300, 2))
    assert len(SEEN["drawn"]) == 600


@pytest.mark.parametrize("projection, filter", [
    ([["y", "CASE WHEN x <> 0 THEN reciprocal(x) ELSE 0 END"]], None),
    ([["y", "coalesce(CASE WHEN x IS NULL OR x = 0 THEN -1 END, reciprocal(x))"]], None),
    ([["y", "reciprocal(x)"]], "x <> 0"),
    ([["y", "x"]], "x IS NOT NULL AND x <> 0 AND reciprocal(x) > 1"),
    ([["y", "reciprocal(x) + twice(x)"]], "twice(x) <> 0 AND reciprocal(x) <> 0"),
])
def test_a_guarded_call_is_not_made_on_the_rows_guarded_out(projection, filter):
    SEEN.clear()
    with udfs.scope(functions_scope()):
        op = make_calc(projection, filter)
        batch = rows_of(400, 3)
        got = [row for b in op.process_batch(batch) for row in b.to_pylist()]
        assert got == duckdb_alone(projection, filter, batch)
    assert SEEN["reciprocal"] and 0 not in SEEN["reciprocal"] and None not in SEEN["reciprocal"]


@pytest.mark.parametrize("sql", ["reciprocal(x)", "twice(reciprocal(x))"])
def test_a_failing_call_names_the_function_and_row_as_duckdbs_call_does(sql):
    with udfs.scope(functions_scope()):
        op = make_calc([["y", sql]])
        batch = pa.record_batch([pa.array([5, 4, 0, 2], pa.int64()), pa.array(["a"] * 4)], schema=SCHEMA)
        with pytest.raises(EngineError) as split:
            op.process_batch(batch)
        with pytest.raises(EngineError) as alone:
            duckdb_alone([["y", sql]], None, batch)
    assert "the Python function reciprocal failed on the row (0)" in split.value.message
    assert split.value.message == alone.value.message
    assert split.value.hint.split("its traceback:")[0] == alone.value.hint.split("its traceback:")[0]
    assert "ZeroDivisionError" in split.value.hint


def test_a_failing_batch_with_bad_rows_keeps_only_the_raising_rows():
    with udfs.scope(functions_scope()):
        ctx = OperatorContext("calc", pa.schema([("x", pa.int64()), ("y", pa.int64())]))
        op = Calc({"projection": [["x", "x"], ["y", "reciprocal(x)"]], "filter": "reciprocal(x) > 10",
                   "bad_rows": True}, ctx)
        op.open()
        assert op._splits[op.query] is not None
        out = op.process_batch(pa.record_batch([pa.array([5, 0, 200, None, 20], pa.int64()),
                                                pa.array(["a"] * 5)], schema=SCHEMA))
    assert [row for b in out for row in b.to_pylist()] == [{"x": 5, "y": 200}, {"x": 20, "y": 50}]
    assert [b.column("weir_function")[0].as_py() for b in ctx.late_output] == ["reciprocal", "reciprocal"]

"""Python aggregate functions (``weir.udaf``) beside the built-in aggregates they imitate: in a
TUMBLE, HOP, CUMULATE and SESSION window and in a GROUP BY over an updating input (retraction), on
hypothesis-varied rows and batch sizes, each result compared with the built-in one computed by
the same operator; CREATE FUNCTION and ``create_function``; the errors a user can act on.

The functions live in ``udaf_functions`` (this folder), which worker processes import by name.
"""
from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import weir
from weir.engine.errors import EngineError
from weir.engine.runtime.job import JobOptions, run_job
from weir.engine.udfs import UdfError
from weir.planner.planner import plan_script
from weir.sql import parse
from weir.sql.errors import WeirSqlError

import udaf_functions

FUNCTIONS = """
CREATE FUNCTION pysum AS 'udaf_functions.PySum' LANGUAGE PYTHON;
CREATE TEMPORARY FUNCTION arrowsum AS 'udaf_functions.ArrowSum' LANGUAGE PYTHON;
CREATE FUNCTION weighted AS 'udaf_functions.WeightedAvg' LANGUAGE PYTHON;
"""
TABLE = """
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
"""
WINDOWS = {
    "tumble": "TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)",
    "hop": "HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
    "cumulate": "CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)",
    "session": "SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND)",
}
#: Each Python aggregate beside the built-in it imitates, in one SELECT (the pairs must agree).
WINDOW_VIEW = """CREATE MATERIALIZED VIEW mv AS
SELECT k, window_start, window_end, COUNT(*) AS n,
       pysum(v) AS py, SUM(v) AS builtin,
       arrowsum(v) FILTER (WHERE v > 0) AS arrow, SUM(v) FILTER (WHERE v > 0) AS arrow_builtin,
       weighted(v, abs(v) % 4 + 1) AS weighted,
       CAST(SUM(v * (abs(v) % 4 + 1)) AS DOUBLE) / SUM(abs(v) % 4 + 1) AS weighted_builtin
FROM TABLE({window}) GROUP BY k, window_start, window_end;"""
#: A GROUP BY over an updating input: each key's count moves between groups, retracting.
UPDATING_VIEW = """CREATE MATERIALIZED VIEW mv AS
SELECT s, pysum(c) AS py, SUM(c) AS builtin, arrowsum(t) AS arrow, SUM(t) AS arrow_builtin, COUNT(*) AS n
FROM (SELECT k, COUNT(*) % 3 AS s, COUNT(*) AS c, SUM(v) AS t FROM events GROUP BY k)
GROUP BY s;"""

rows = st.lists(st.tuples(st.integers(0, 40), st.sampled_from("abcde"),
                          st.one_of(st.none(), st.integers(-50, 50))), min_size=1, max_size=30)


def write_events(path: Path, events) -> Path:
    lines = [f"2024-01-01 00:00:{t:02d},{k},{'' if v is None else v}\n" for t, k, v in events]
    path.write_text("ts,k,v\n" + "".join(lines))
    return path


def view_rows(tmp: Path, view: str, name: str, summaries: list | None = None, **job_settings: str) -> list[tuple]:
    sql = FUNCTIONS + TABLE.format(data=tmp / "events.csv") + view
    db = tmp / f"{name}.duckdb"
    graph = plan_script(parse(sql), db_path=str(db), settings=job_settings).graph
    summary = run_job(graph, JobOptions(state_dir=tmp / f"state-{name}"))
    if summaries is not None:
        summaries.append(summary)
    with duckdb.connect(str(db), read_only=True) as con:
        return con.sql("SELECT * FROM mv ORDER BY ALL").fetchall()


def assert_pairs_agree(found: list[tuple], pairs: list[tuple[int, int]]) -> None:
    assert found
    for row in found:
        for python, builtin in pairs:
            expected = row[builtin]
            if isinstance(expected, float):
                assert row[python] == pytest.approx(expected), row
            else:
                assert row[python] == expected, row


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=rows, batch=st.integers(1, 7), window=st.sampled_from(sorted(WINDOWS)))
def test_python_aggregates_in_windows_equal_the_built_in_ones(tmp_path_factory, events, batch, window):
    tmp = tmp_path_factory.mktemp("w")
    write_events(tmp / "events.csv", events)
    found = view_rows(tmp, WINDOW_VIEW.format(window=WINDOWS[window]), "w", **{"weir.source.batch-size": str(batch)})
    assert_pairs_agree(found, [(4, 5), (6, 7), (8, 9)])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=rows, batch=st.integers(1, 7))
def test_python_aggregates_retract_as_the_built_in_ones_over_an_updating_input(tmp_path_factory, events, batch):
    tmp = tmp_path_factory.mktemp("u")
    write_events(tmp / "events.csv", events)
    found = view_rows(tmp, UPDATING_VIEW, "u", **{"weir.source.batch-size": str(batch)})
    assert_pairs_agree(found, [(1, 2), (3, 4)])
    # every key is in exactly one group at the end: the retractions moved it there
    assert sum(n for *_, n in found) == len({k for _, k, _ in events})


def test_at_parallelism_2_with_two_phases_the_results_are_those_of_parallelism_1(tmp_path):
    events = [(t, "abcde"[t * 7 % 5], t * 13 % 21 - 10) for t in range(40)]
    write_events(tmp_path / "events.csv", events)
    view = WINDOW_VIEW.format(window=WINDOWS["hop"])
    one = view_rows(tmp_path, view, "p1", **{"weir.source.batch-size": "3"})
    summaries: list = []
    two = view_rows(tmp_path, view, "p2", summaries, **{"weir.source.batch-size": "3", "parallelism.default": "2"})
    assert two == one
    # the accumulators crossed the exchange as partials (pickled), merged where they met
    assert summaries[0].counter("pre_aggregated_rows") > 0
    assert_pairs_agree(two, [(4, 5), (6, 7), (8, 9)])
    updating = view_rows(tmp_path, UPDATING_VIEW, "u2", **{"weir.source.batch-size": "3", "parallelism.default": "2"})
    assert_pairs_agree(updating, [(1, 2), (3, 4)])


def test_explain_names_the_python_aggregate(tmp_path):
    sql = FUNCTIONS + TABLE.format(data=tmp_path / "events.csv") + UPDATING_VIEW
    script = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb"))
    aggregate = [n for n in script.graph.nodes if n.kind == "group_aggregate"][-1]
    assert '_agg0=pysum("c")' in aggregate.description
    calls = {c.name: c for c in aggregate.config.aggregates}
    assert calls["_agg0"].python.qualname == "PySum" and calls["_agg0"].python.retracts
    assert not script.graph.functions  # aggregates travel on their calls, not as scalar UDFs


# -- the Python API ---------------------------------------------------------------------------------


def test_create_function_takes_a_declared_class_an_instance_or_a_class_with_a_result_type(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    class Count:  # a plain class, defined here (parallelism 1), declared by create_function
        def create_accumulator(self):
            return [0]

        def accumulate(self, acc, *args):
            acc[0] += 1

        def merge(self, acc, others):
            acc[0] += sum(o[0] for o in others)

        def get_value(self, acc):
            return acc[0]

    write_events(tmp_path / "events.csv", [(t, "ab"[t % 2], t) for t in range(12)])
    with weir.connect(db=str(tmp_path / "r.duckdb"), state_dir=tmp_path / "jobs") as con:
        con.create_function("py_sum", udaf_functions.PySum)
        con.create_function("arrow_sum", udaf_functions.ArrowSum())
        con.create_function("py_count", Count, result_type="BIGINT")
        con.execute(TABLE.format(data=tmp_path / "events.csv"))
        con.execute("""CREATE MATERIALIZED VIEW mv AS SELECT k, window_start, py_sum(v) AS a, arrow_sum(v) AS b,
                       py_count() AS c, SUM(v) AS s, COUNT(*) AS n
                       FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                       GROUP BY k, window_start, window_end""").wait(120)
        found = con.sql("SELECT * FROM mv ORDER BY k, window_start").fetchall()
    assert len(found) == 4
    assert_pairs_agree(found, [(2, 5), (3, 5), (4, 6)])


# -- errors -------------------------------------------------------------------------------------------


def plan(tmp: Path, view: str, functions: str = FUNCTIONS):
    return plan_script(parse(functions + TABLE.format(data=tmp / "events.csv") + view), db_path=str(tmp / "v.duckdb"))


def test_a_class_without_accumulate_is_refused_where_it_is_named(tmp_path):
    with pytest.raises(WeirSqlError) as raised:
        plan(tmp_path, "", "CREATE FUNCTION f AS 'udaf_functions.NoAccumulate' LANGUAGE PYTHON;")
    problem = raised.value.problems[0]
    assert "NoAccumulate has no accumulate method" in problem.message and problem.line == 1
    assert "accumulate(acc, *args)" in problem.hint
    with pytest.raises(UdfError, match="has no accumulate method"):
        weir.udaf(udaf_functions.NoAccumulate, result_type="BIGINT")
    with pytest.raises(UdfError, match="needs a result_type"):
        weir.udaf()(type("Undeclared", (udaf_functions.NoMerge,), {}))


def test_a_function_without_retract_over_an_updating_input_is_refused_at_plan_time(tmp_path):
    view = ("CREATE MATERIALIZED VIEW mv AS SELECT s, weighted(c, c) AS w FROM "
            "(SELECT k, COUNT(*) % 3 AS s, COUNT(*) AS c FROM events GROUP BY k) GROUP BY s;")
    with pytest.raises(WeirSqlError) as raised:
        plan(tmp_path, view)
    problem = raised.value.problems[0]
    assert "weighted has no retract method, and its input is an updating stream" in problem.message
    assert (problem.line, problem.col) == (8, view.index("weighted(") + 1)  # the call (the view's line)
    assert "define retract(self, acc, *args)" in problem.hint
    # over an append-only input it needs none
    plan(tmp_path, "CREATE MATERIALIZED VIEW mv AS SELECT k, weighted(v, v) AS w FROM events GROUP BY k;")


def test_a_function_without_merge_is_refused_in_a_window(tmp_path):
    functions = FUNCTIONS + "CREATE FUNCTION counted AS 'udaf_functions.NoMerge' LANGUAGE PYTHON;"
    with pytest.raises(WeirSqlError, match="counted has no merge method, which a window aggregate needs"):
        plan(tmp_path, WINDOW_VIEW.format(window=WINDOWS["tumble"]).replace("pysum(v)", "counted(v)"), functions)
    plan(tmp_path, "CREATE MATERIALIZED VIEW mv AS SELECT k, counted(v) AS n FROM events GROUP BY k;", functions)


@pytest.mark.parametrize("source,group,key", [
    (f"TABLE({WINDOWS['session']})", "k, window_start, window_end", "('b')"),
    (f"TABLE({WINDOWS['hop']})", "k, v % 2, window_start, window_end", "('b', 0)"),
    ("events", "v % 3, k", "(0, 'b')"),
])
def test_an_exception_inside_accumulate_names_the_group_key(tmp_path, source, group, key):
    """Windows, sessions and group aggregates (several keys: their values in GROUP BY order) say
    which group the failing row was in."""
    write_events(tmp_path / "events.csv", [(1, "a", 5), (2, "a", 4), (3, "b", 0), (4, "b", 2)])
    functions = "CREATE FUNCTION inverse AS 'udaf_functions.Inverse' LANGUAGE PYTHON;"
    keys = group.replace(", window_start, window_end", "")
    graph = plan(tmp_path, f"CREATE MATERIALIZED VIEW mv AS SELECT {keys}, inverse(v) AS i FROM {source} "
                           f"GROUP BY {group};", functions).graph
    with pytest.raises(EngineError) as raised:
        run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    assert f"inverse (accumulate) failed on the row (0) of the group with the key {key}: ZeroDivisionError" \
        in raised.value.message


@pytest.mark.parametrize("window", [True, False])
def test_an_exception_inside_accumulate_fails_the_job_naming_the_function_the_row_and_the_traceback(tmp_path, window):
    write_events(tmp_path / "events.csv", [(1, "a", 5), (2, "a", 4), (3, "b", 0), (4, "b", 2)])
    functions = "CREATE FUNCTION inverse AS 'udaf_functions.Inverse' LANGUAGE PYTHON;"
    source = f"TABLE({WINDOWS['tumble']})" if window else "events"
    group = "k, window_start, window_end" if window else "k"
    view = f"CREATE MATERIALIZED VIEW mv AS SELECT k, inverse(v) AS i FROM {source} GROUP BY {group};"
    graph = plan(tmp_path, view, functions).graph
    with pytest.raises(EngineError) as raised:
        run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    error = raised.value
    assert "the Python function inverse (accumulate) failed on the row (0) of the group with the key ('b'): " \
        "ZeroDivisionError" in error.message
    assert "100 // v" in error.hint and "udaf_functions.py" in error.hint  # the traceback
    assert error.hint.count("100 // v") == 1, "the row's traceback alone, not the group's chained before it"
    assert "During handling" not in error.hint
    assert error.operator_id and "aggregate" in error.operator_id


def test_a_value_of_the_wrong_type_fails_the_job_naming_it(tmp_path):
    write_events(tmp_path / "events.csv", [(1, "a", 5)])
    functions = "CREATE FUNCTION wrong AS 'udaf_functions.Wrong' LANGUAGE PYTHON;"
    graph = plan(tmp_path, "CREATE MATERIALIZED VIEW mv AS SELECT k, wrong(v) AS w FROM events GROUP BY k;",
                 functions).graph
    with pytest.raises(EngineError, match="wrong returned '5 units' from get_value, not a BIGINT") as raised:
        run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    assert "result_type BIGINT" in raised.value.hint


def test_a_global_aggregate_and_a_function_of_no_argument(tmp_path):
    write_events(tmp_path / "events.csv", [(t, "ab"[t % 2], t - 3) for t in range(9)])
    functions = FUNCTIONS + "CREATE FUNCTION counted AS 'udaf_functions.NoMerge' LANGUAGE PYTHON;"
    sql = functions + TABLE.format(data=tmp_path / "events.csv") + \
        "CREATE MATERIALIZED VIEW mv AS SELECT pysum(v) AS s, SUM(v) AS b, counted() AS n, COUNT(*) AS c FROM events;"
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb")).graph
    run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    with duckdb.connect(str(tmp_path / "v.duckdb"), read_only=True) as con:
        assert con.sql("SELECT * FROM mv").fetchall() == [(9, 9, 9, 9)]

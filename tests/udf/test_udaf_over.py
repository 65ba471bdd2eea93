"""Python aggregate functions OVER a window (RANGE interval, ROWS n, UNBOUNDED PRECEDING): beside
the built-in SUM and COUNT of the same query on hypothesis-varied rows, frames and batch sizes; the
operator driven directly, snapshotted and restored at another parallelism, against DuckDB's window
functions; a job whose worker is killed (SIGKILL) at parallelism 2 with exact output; the plan-time
refusal of a bounded frame for a function without retract.

``udaf_functions`` (this folder) and the classes below are imported by name in every process.
"""
from __future__ import annotations

import random
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import weir
from weir.engine.errors import EngineError
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.over_aggregate import OverAggregate
from weir.engine.runtime.job import JobOptions, run_job
from weir.engine.state.key_groups import key_groups, range_for_subtask
from weir.planner.planner import plan_script
from weir.sql import parse
from weir.sql.errors import WeirSqlError

import udaf_functions
from jobs import run_with_worker_1_killed


@weir.udaf(result_type="BIGINT")
class ArrowCount:
    """COUNT(v) over pyarrow arrays."""

    def create_accumulator(self):
        return [0]

    def accumulate_batch(self, acc, v: pa.Array):
        acc[0] += len(v) - v.null_count

    def retract_batch(self, acc, v: pa.Array):
        acc[0] -= len(v) - v.null_count

    def get_value(self, acc):
        return acc[0]


@weir.udaf(result_type="BIGINT")
class RowCount:
    """COUNT(*), a row at a time, of no argument."""

    def create_accumulator(self):
        return [0]

    def accumulate(self, acc):
        acc[0] += 1

    def retract(self, acc):
        acc[0] -= 1

    def get_value(self, acc):
        return acc[0]


FUNCTIONS = """
CREATE FUNCTION pysum AS 'udaf_functions.PySum' LANGUAGE PYTHON;
CREATE FUNCTION arrowsum AS 'udaf_functions.ArrowSum' LANGUAGE PYTHON;
CREATE FUNCTION weighted AS 'udaf_functions.WeightedAvg' LANGUAGE PYTHON;
CREATE FUNCTION arrowcount AS 'test_udaf_over.ArrowCount' LANGUAGE PYTHON;
CREATE FUNCTION rowcount AS 'test_udaf_over.RowCount' LANGUAGE PYTHON;
"""
TABLE = """
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
"""
FRAMES = {
    "range": "RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW",
    "rows": "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
    "rows0": "ROWS BETWEEN CURRENT ROW AND CURRENT ROW",
    "unbounded_rows": "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "unbounded_range": "",  # ORDER BY alone: RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
}
#: Each Python aggregate beside the built-in it imitates (columns 3.., in pairs); WeightedAvg has no
#: retract, so it is OVER unbounded frames only.
MIXED = """CREATE MATERIALIZED VIEW mixed AS
SELECT k, ts, v, pysum(v) OVER w AS py, SUM(v) OVER w AS s, arrowsum(v) OVER w AS arrow, SUM(v) OVER w AS s2,
       arrowcount(v) OVER w AS ac, COUNT(v) OVER w AS c, rowcount() OVER w AS rc, COUNT(*) OVER w AS n{weighted}
FROM events WINDOW w AS ({partition}ORDER BY ts {frame});
CREATE MATERIALIZED VIEW python_only AS
SELECT k, ts, v, pysum(v) OVER w AS py, rowcount() OVER w AS rc
FROM events WINDOW w AS ({partition}ORDER BY ts {frame});
"""
WEIGHTED = (", weighted(v, abs(v) % 4 + 1) OVER w AS wa, "
            "CAST(SUM(v * (abs(v) % 4 + 1)) OVER w AS DOUBLE) / SUM(abs(v) % 4 + 1) OVER w AS wb")

events = st.lists(st.tuples(st.integers(0, 30), st.sampled_from("abc"), st.one_of(st.none(), st.integers(-20, 20))),
                  min_size=1, max_size=25)


def write_events(path: Path, rows) -> None:
    path.write_text("ts,k,v\n" + "".join(f"2024-01-01 00:00:{t:02d},{k},{'' if v is None else v}\n"
                                         for t, k, v in rows))


def views(db: Path, names) -> dict[str, list]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {name: con.sql(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in names}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=events, batch=st.integers(1, 7), frame=st.sampled_from(sorted(FRAMES)), partitioned=st.booleans())
def test_python_aggregates_over_every_frame_equal_the_built_in_ones(tmp_path_factory, rows, batch, frame,
                                                                     partitioned):
    tmp = tmp_path_factory.mktemp("over")
    write_events(tmp / "events.csv", rows)
    view = MIXED.format(frame=FRAMES[frame], partition="PARTITION BY k " if partitioned else "",
                        weighted=WEIGHTED if frame.startswith("unbounded") else "")
    graph = plan_script(parse(FUNCTIONS + TABLE.format(data=tmp / "events.csv") + view),
                        db_path=str(tmp / "v.duckdb"), settings={"weir.source.batch-size": str(batch)}).graph
    run_job(graph, JobOptions(state_dir=tmp / "state"))
    found = views(tmp / "v.duckdb", ["mixed", "python_only"])
    assert found["mixed"]  # the first row is never late
    for row in found["mixed"]:
        for python in range(3, 11, 2):
            assert row[python] == row[python + 1], (python, row)
        if len(row) > 11:  # two arguments
            weighted, builtin = row[11:]
            assert (weighted is None and builtin is None) or weighted == pytest.approx(builtin), row
    # without a built-in beside them, the same values
    assert sorted(found["python_only"], key=repr) == sorted(((r[0], r[1], r[2], r[3], r[9]) for r in found["mixed"]),
                                                            key=repr)


# -- the operator: batches, snapshots and rescaling ---------------------------------------------------

SECOND = 1_000_000
MAX_P = 16
TS = pa.timestamp("us")
INPUT = pa.schema([("k", pa.string()), ("v", pa.int64()), ("ts", TS)])
OPERATOR_FRAMES = {
    "range": ({"kind": "range", "preceding": 4 * SECOND},
              "RANGE BETWEEN INTERVAL '4 seconds' PRECEDING AND CURRENT ROW"),
    "rows": ({"kind": "rows", "preceding": 2}, "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"),
    "unbounded_rows": ({"kind": "unbounded", "mode": "rows"}, "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
    "unbounded_range": ({"kind": "unbounded", "mode": "range"},
                        "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"),
}


def make_op(frame: str, subtask: int = 0, parallelism: int = 1) -> OverAggregate:
    python = [("pysum", udaf_functions.PySum, "v"), ("arrowcount", ArrowCount, "v"), ("rowcount", RowCount, None)]
    aggregates = [{"name": "s", "function": "sum", "argument": "v"},
                  *({"name": name, "function": name, "argument": argument,
                     "python": cls.__weir_udaf__.spec(name, 0 if argument is None else 1).to_json()}
                    for name, cls, argument in python)]
    config = {"columns": INPUT.names, "partition_keys": ["k"], "time_column": "ts",
              "frame": OPERATOR_FRAMES[frame][0], "aggregates": aggregates}
    schema = pa.schema([*INPUT, *(pa.field(a["name"], pa.int64()) for a in aggregates)])
    op = OverAggregate(config, OperatorContext("over", schema, subtask_index=subtask, parallelism=parallelism,
                                               max_parallelism=MAX_P))
    op.open()
    return op


def random_steps(rng: random.Random, n: int, max_batch: int) -> tuple[pa.Table, list]:
    """Rows over 40 s in whole seconds (ties happen), keys a..c and NULL; batches of random sizes,
    each shuffled, each followed by a watermark just below its last time (no row is late)."""
    times = sorted(rng.randrange(0, 40) * SECOND for _ in range(n))
    rows = pa.table([pa.array([rng.choice(["a", "b", "c", None]) for _ in range(n)], pa.string()),
                     pa.array([rng.choice([None, *range(-5, 9)]) for _ in range(n)], pa.int64()),
                     pa.array(times, TS)], schema=INPUT)
    items, at = [], 0
    while at < n:
        piece = rows.slice(at, rng.randint(1, max_batch))
        order = list(range(piece.num_rows))
        rng.shuffle(order)
        items += [piece.take(order), piece.column("ts")[-1].value - 1]
        at += piece.num_rows
    return rows, items + [MAX_WATERMARK]


def drive(ops: list[OverAggregate], items: list) -> list[tuple]:
    out = []
    for item in items:
        if isinstance(item, int):
            for op in ops:
                out += [tuple(r.values()) for b in op.process_watermark(item) for r in b.to_pylist()]
            continue
        owners = key_groups(item, ["k"], MAX_P).to_pylist()
        for i, op in enumerate(ops):
            owned = range_for_subtask(i, len(ops), MAX_P)
            for batch in item.filter(pa.array([g in owned for g in owners])).to_batches():
                assert op.process_batch(batch) == []
    return out


def oracle(rows: pa.Table, frame: str) -> list[tuple]:
    con = duckdb.connect()
    con.register("t", rows)
    order = "ts, k, v" if "rows" in frame else "ts"  # the operator breaks ties in time by every column
    return sorted(con.execute(
        f"SELECT *, CAST(SUM(v) OVER w AS BIGINT), CAST(SUM(v) OVER w AS BIGINT), COUNT(v) OVER w, COUNT(*) OVER w "
        f"FROM t WINDOW w AS (PARTITION BY k ORDER BY {order} {OPERATOR_FRAMES[frame][1]})").fetchall(), key=repr)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), max_batch=st.integers(1, 9), frame=st.sampled_from(sorted(OPERATOR_FRAMES)),
       restore_at=st.floats(0, 1), parallelism=st.sampled_from([1, 2, 3]))
def test_accumulators_restore_exactly_at_another_parallelism(seed, max_batch, frame, restore_at, parallelism):
    rng = random.Random(seed)
    rows, items = random_steps(rng, rng.randint(1, 30), max_batch)
    cut = int(len(items) * restore_at)
    first = make_op(frame)
    before = drive([first], items[:cut])
    snapshot = OverAggregate.merge_snapshots([first.snapshot()])
    assert "over_accumulators" in snapshot["tables"]
    restored = [make_op(frame, subtask=i, parallelism=parallelism) for i in range(parallelism)]
    for op in restored:
        op.restore(snapshot)
    assert sorted(before + drive(restored, items[cut:]), key=repr) == oracle(rows, frame)
    for op in restored:  # one accumulator per key the history holds: none once a bounded frame is empty
        held = op.con.execute("SELECT count(*) FROM (SELECT DISTINCT key_group, c0 FROM history)").fetchone()[0]
        assert op.state_rows()["over_accumulators"] == held


# -- a killed worker -------------------------------------------------------------------------------------

KILLED_JOB = """
CREATE FUNCTION pysum AS 'udaf_functions.PySum' LANGUAGE PYTHON;
CREATE FUNCTION arrowsum AS 'udaf_functions.ArrowSum' LANGUAGE PYTHON;
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{data}', 'format' = 'csv');
CREATE MATERIALIZED VIEW ranged AS SELECT k, ts, v, pysum(v) OVER w AS py, arrowsum(v) OVER w AS arrow
FROM events WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '4' SECOND PRECEDING AND CURRENT ROW);
CREATE MATERIALIZED VIEW counted AS SELECT k, ts, v, pysum(v) OVER (PARTITION BY k ORDER BY ts ROWS 2 PRECEDING) AS py
FROM events;
"""
ORACLES = {
    "ranged": "SELECT k, ts, v, SUM(v) OVER w, SUM(v) OVER w FROM read_csv('{files}', header = true) "
              "WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL 4 SECONDS PRECEDING AND CURRENT ROW) "
              "ORDER BY ALL",
    "counted": "SELECT k, ts, v, SUM(v) OVER (PARTITION BY k ORDER BY ts, k, v ROWS 2 PRECEDING) "
               "FROM read_csv('{files}', header = true) ORDER BY ALL",
}


def test_accumulators_survive_a_killed_worker_at_parallelism_2_with_exact_output(tmp_path: Path, monkeypatch):
    (tmp_path / "events").mkdir()
    for part in range(2):  # two splits in time order (no row is late), some rows twice
        rows = "".join(f"2024-01-01 00:00:{i:02d},{'abc'[i * 7 % 3]},{i * 5 % 11 - 3}\n" for i in range(part, 28, 2)
                       for _ in range(1 + (i % 4 == 0)))
        (tmp_path / "events" / f"part-{part}.csv").write_text("ts,k,v\n" + rows)
    warnings = run_with_worker_1_killed(tmp_path, monkeypatch, KILLED_JOB.format(data=tmp_path / "events"), 240)
    assert len(warnings) == 1 and "restarting" in warnings[0]
    found = views(tmp_path / "v.duckdb", ORACLES)
    files = f"{tmp_path / 'events'}/*.csv"
    for name, oracle_sql in ORACLES.items():
        assert found[name] and found[name] == duckdb.sql(oracle_sql.format(files=files)).fetchall(), name


# -- refusals -------------------------------------------------------------------------------------------------


def plan(tmp: Path, view: str):
    return plan_script(parse(FUNCTIONS + TABLE.format(data=tmp / "events.csv") + view), db_path=str(tmp / "v.duckdb"))


@pytest.mark.parametrize("frame", ["ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
                                   "RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW"])
def test_a_function_without_retract_is_refused_in_a_bounded_frame_at_plan_time(tmp_path, frame):
    view = (f"CREATE MATERIALIZED VIEW mv AS SELECT k, weighted(v, v) OVER (PARTITION BY k ORDER BY ts {frame}) "
            "AS w FROM events;")
    with pytest.raises(WeirSqlError) as raised:
        plan(tmp_path, view)
    problem = raised.value.problems[0]
    assert "weighted has no retract method, which a bounded OVER frame needs" in problem.message
    view_line = (FUNCTIONS + TABLE).count("\n") + 1
    assert (problem.line, problem.col) == (view_line, view.index("weighted(") + 1)  # the call
    assert "define retract(self, acc, *args)" in problem.hint and "UNBOUNDED PRECEDING" in problem.hint
    # an unbounded frame retracts nothing: planned, the call on the over_aggregate node
    script = plan(tmp_path, view.replace(frame, "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"))
    over = next(n for n in script.graph.nodes if n.kind == "over_aggregate")
    assert over.config.aggregates[0].python.qualname == "WeightedAvg"
    assert "weighted(_arg0) [Python]" in over.description


def test_filter_on_a_python_aggregate_over_a_window_is_refused(tmp_path):
    view = ("CREATE MATERIALIZED VIEW mv AS SELECT k, pysum(v) FILTER (WHERE v > 0) OVER (PARTITION BY k ORDER BY ts) "
            "AS s FROM events;")
    with pytest.raises(WeirSqlError, match="FILTER on the Python aggregate function pysum OVER a window"):
        plan(tmp_path, view)


def test_an_exception_inside_accumulate_over_a_window_names_the_function_the_row_and_the_key(tmp_path):
    write_events(tmp_path / "events.csv", [(1, "a", 5), (2, "a", 4), (3, "b", 0), (4, "b", 2)])
    functions = "CREATE FUNCTION inverse AS 'udaf_functions.Inverse' LANGUAGE PYTHON;"
    view = ("CREATE MATERIALIZED VIEW mv AS SELECT k, inverse(v) OVER (PARTITION BY k ORDER BY ts ROWS 1 PRECEDING) "
            "AS i FROM events;")
    graph = plan_script(parse(functions + TABLE.format(data=tmp_path / "events.csv") + view),
                        db_path=str(tmp_path / "v.duckdb")).graph
    with pytest.raises(EngineError) as raised:
        run_job(graph, JobOptions(state_dir=tmp_path / "state"))
    assert "inverse (accumulate) failed on the row (0) of the group with the key ('b'): ZeroDivisionError" \
        in raised.value.message
    assert "100 // v" in raised.value.hint and "over_aggregate" in raised.value.operator_id

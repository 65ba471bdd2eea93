"""A watermark that fires many windows at once streams them out in bounded batches
(``engine.operators.firings``): session windows, window joins, window Top-N, OVER
aggregates and an interval join's unmatched outer rows emit no batch larger than
``OUTPUT_BATCH_ROWS``, and exactly the rows (in the same order) they emit when the
whole firing fits in one batch, whatever the bound; what fired leaves the state once read."""
from __future__ import annotations

import random
import shutil

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators import duckdb_sql
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.firings import FiringStream
from weir.engine.operators.session_window import SESSIONS, SessionWindow
from weir.engine.operators.window_join import WindowJoin
from weir.engine.operators.window_rank import WINDOW_ROWS, WindowRank
from tests import test_queries as golden  # the golden queries' harness

SECOND = 1_000_000
TS = pa.timestamp("us")
WHOLE = 1 << 20  # a bound no firing here reaches: every firing is one batch

# -- the three operators, each with input that fires many windows per watermark ----------------

SESSION_CONFIG = {
    "window": {"kind": "session", "time_column": "ts", "gap": 4 * SECOND},
    "keys": [["k", "k"]],
    "aggregates": [{"name": "n", "function": "count", "argument": None},
                   {"name": "total", "function": "sum", "argument": "v"},
                   {"name": "values", "function": "count", "argument": "v", "distinct": True}],
    "having": None,
    "projection": [["k", "k"], ["window_start", "window_start"], ["window_end", "window_end"],
                   ["n", "n"], ["total", "total"], ["values", "values"]],
}
SESSION_OUT = pa.schema([("k", pa.int64()), ("window_start", TS), ("window_end", TS), ("n", pa.int64()),
                         ("total", pa.int64()), ("values", pa.int64())])
EVENTS = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("ts", TS)])


def session_steps(rng: random.Random, keys: int) -> list:
    """Two sessions per key (rows 0–3 s, then 20–23 s), in batches; a watermark at 10 s fires
    every key's first session at once, the final one every second session."""
    steps = []
    for base in (0, 20):
        rows = [(k, rng.randrange(5), (base + rng.randrange(4)) * SECOND) for k in range(keys) for _ in range(2)]
        rng.shuffle(rows)
        for at in range(0, len(rows), 97):
            steps.append((0, pa.RecordBatch.from_pylist(
                [dict(zip(EVENTS.names, r)) for r in rows[at:at + 97]], EVENTS)))
        steps.append(10 * SECOND if base == 0 else MAX_WATERMARK)
    return steps


def session_op() -> SessionWindow:
    return SessionWindow(SESSION_CONFIG, OperatorContext("session", SESSION_OUT))


SIZE = 5 * SECOND
LEFT = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("window_start", TS), ("window_end", TS)])
RIGHT = pa.schema([("k", pa.int64()), ("w", pa.string()), ("window_start", TS), ("window_end", TS)])
JOIN_OUT = pa.schema([*(f.with_name(f"l_{f.name}") for f in LEFT), *(f.with_name(f"r_{f.name}") for f in RIGHT)])


def join_op(join_type: str) -> WindowJoin:
    side = lambda s: {"columns": s.names, "keys": ["k"], "window_start": "window_start", "window_end": "window_end"}
    return WindowJoin({"join_type": join_type, "left": side(LEFT), "right": side(RIGHT)},
                      OperatorContext("join", LEFT if join_type in ("semi", "anti") else JOIN_OUT))


def join_steps(rng: random.Random, keys: int) -> list:
    """Rows of both sides over 4 windows: the right side repeats the key and window of every other
    left row, and has rows of keys the left lacks (and the left one of a key the right lacks);
    one watermark fires two windows, the final one the rest."""
    cells = [(rng.randrange(keys), rng.randrange(4) * SIZE) for _ in range(keys * 3)]
    right_cells = cells[::2] + [(keys + rng.randrange(2), rng.randrange(4) * SIZE) for _ in range(keys)]
    cells.append((keys + 2, 0))  # a left row no right row matches: every join type emits a row
    steps = []
    for index, (schema, sides) in enumerate(((LEFT, cells), (RIGHT, right_cells))):
        batch = pa.RecordBatch.from_arrays([
            pa.array([k for k, _ in sides], pa.int64()),
            pa.array(range(len(sides)), pa.int64()) if index == 0 else pa.array([f"w{i}" for i in range(len(sides))]),
            pa.array([start for _, start in sides], pa.int64()).cast(TS),
            pa.array([start + SIZE for _, start in sides], pa.int64()).cast(TS)], schema=schema)
        steps += [(index, batch.slice(at, 50)) for at in range(0, batch.num_rows, 50)]
    return [*steps, 2 * SIZE - 1000, MAX_WATERMARK]


RANK_IN = pa.schema([("auction", pa.int64()), ("price", pa.int64()), ("window_start", TS), ("window_end", TS)])
RANK_CONFIG = {"window_start": "window_start", "window_end": "window_end", "partition_keys": ["auction"],
               "order_by": ['"price" DESC NULLS LAST'], "function": "row_number", "rank_column": "rownum",
               "rank_range": [1, 3], "filter": None,
               "projection": [[n, f'"{n}"'] for n in [*RANK_IN.names, "rownum"]], "ties": "earliest_first"}
RANK_OUT = RANK_IN.append(pa.field("rownum", pa.int64()))


def rank_op() -> WindowRank:
    return WindowRank(RANK_CONFIG, OperatorContext("rank", RANK_OUT))


def rank_steps(rng: random.Random, keys: int) -> list:
    """Top 3 per auction and window over 3 windows with many ties; the watermarks fire one window,
    then the other two at once."""
    rows = []
    for _ in range(keys * 6):
        start = rng.randrange(3) * SIZE
        rows.append({"auction": rng.randrange(keys), "price": rng.choice([1, 2, 2, 5, None]),
                     "window_start": start, "window_end": start + SIZE})
    ints = pa.schema([f if f.type != TS else f.with_type(pa.int64()) for f in RANK_IN])
    batch = pa.RecordBatch.from_pylist(rows, ints)
    batch = pa.RecordBatch.from_arrays([c if f.type != TS else c.cast(TS) for c, f in zip(batch.columns, RANK_IN)],
                                       schema=RANK_IN)
    return [*((0, batch.slice(at, 64)) for at in range(0, batch.num_rows, 64)), SIZE - 1000, MAX_WATERMARK]


# -- driving -----------------------------------------------------------------------------------

def drive(op, steps: list, batch_rows: int) -> list[list[pa.RecordBatch]]:
    """Every step into ``op`` with output batches of at most ``batch_rows`` rows; what each
    watermark emitted, checking that a firing of more than two batches was streamed."""
    fired = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", batch_rows)
        op.open()
        for step in steps:
            if isinstance(step, int):
                out = op.process_watermark(step)
                streamed = not isinstance(out, list)
                fired.append(list(out))
                if sum(b.num_rows for b in fired[-1]) > 2 * batch_rows:
                    assert streamed  # read from DuckDB as it was consumed
            else:
                assert op.process_batch(step[1], step[0]) == []
    for batches in fired:
        assert all(0 < b.num_rows <= batch_rows and b.schema == op.ctx.output_schema for b in batches)
    return fired


def rows(batches: list[pa.RecordBatch]) -> list[tuple]:
    return [tuple(r.values()) for b in batches for r in b.to_pylist()]


BOUNDS = st.sampled_from([1, 3, 16, 100])


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), keys=st.integers(1, 120), bound=BOUNDS)
def test_a_session_firing_of_many_sessions_is_streamed_in_bounded_batches(seed, keys, bound):
    steps = session_steps(random.Random(seed), keys)
    bounded_op, whole_op = session_op(), session_op()
    bounded, whole = drive(bounded_op, steps, bound), drive(whole_op, steps, WHOLE)
    assert [rows(f) for f in bounded] == [rows(f) for f in whole]  # ordered by window_end, key
    assert [len(rows(f)) for f in whole] == [keys, keys]  # each watermark fired every key's session
    assert bounded_op._run(f"SELECT count(*) FROM {SESSIONS}") == [(0,)]  # the fired sessions left
    assert bounded_op.ctx.metrics["rows_out"] == 2 * keys
    assert bounded_op.snapshot()["tables"]["session_distinct_values_0"].num_rows == 0
    bounded_op.close(), whole_op.close()


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), keys=st.integers(1, 80), bound=BOUNDS,
       join_type=st.sampled_from(["inner", "left", "full", "semi", "anti"]))
@example(seed=1, keys=1, bound=1, join_type="anti")  # every left row matched: nothing to emit, before
def test_a_window_join_firing_of_many_windows_is_streamed_in_bounded_batches(seed, keys, bound, join_type):
    steps = join_steps(random.Random(seed), keys)
    bounded_op, whole_op = join_op(join_type), join_op(join_type)
    bounded, whole = drive(bounded_op, steps, bound), drive(whole_op, steps, WHOLE)
    end = bounded_op.ctx.output_schema.names.index("l_window_end" if join_type not in ("semi", "anti")
                                                   else "window_end")
    for b, w in zip(bounded, whole):
        assert sorted(rows(b), key=repr) == sorted(rows(w), key=repr)  # order within a window is not defined
        ends = [r[end] or r[-1] for r in rows(b)]  # a right row without a left one: its own window_end
        assert ends == sorted(ends)  # ordered by window
    assert sum(len(rows(w)) for w in whole) > 0
    tables = bounded_op.snapshot()["tables"]
    assert sorted(tables) == ["left_rows", "right_rows"] and [t.num_rows for t in tables.values()] == [0, 0]
    bounded_op.close(), whole_op.close()


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10**6), keys=st.integers(1, 120), bound=BOUNDS)
def test_a_window_top_n_firing_of_many_windows_is_streamed_in_bounded_batches(seed, keys, bound):
    steps = rank_steps(random.Random(seed), keys)
    bounded_op, whole_op = rank_op(), rank_op()
    bounded, whole = drive(bounded_op, steps, bound), drive(whole_op, steps, WHOLE)
    assert [rows(f) for f in bounded] == [rows(f) for f in whole]  # ordered by window, key, rank
    assert sum(len(rows(f)) for f in whole) > 0
    assert bounded_op._run(f"SELECT count(*) FROM {WINDOW_ROWS}") == [(0,)]
    bounded_op.close(), whole_op.close()


@pytest.mark.parametrize("make, steps, state", [
    (session_op, session_steps, SESSIONS), (rank_op, rank_steps, WINDOW_ROWS),
    (lambda: join_op("inner"), join_steps, "left_rows")])
def test_the_next_call_into_the_operator_ends_a_stream_and_deletes_what_fired(monkeypatch, make, steps, state):
    """Drivers read every stream to the end; one abandoned is not emitted further, and what it
    fired still leaves the state before the operator does anything else."""
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 2)
    op = make()
    op.open()
    rest = steps(random.Random(1), 60)
    *batches, final = [s for s in rest if not isinstance(s, int) or s == MAX_WATERMARK]
    for index, batch in batches:
        op.process_batch(batch, index)
    fired = iter(op.process_watermark(final))
    assert next(fired).num_rows <= 2
    assert op.snapshot()["tables"][state].num_rows == 0  # the next call ended the stream first
    assert list(fired) == []
    op.close()


@pytest.mark.parametrize("folder", ["session_bids_per_bidder", "window_join_outer", "window_topn_auctions",
                                    "over_aggregates", "interval_join_shipments"])
def test_a_golden_job_with_one_row_output_batches_and_a_checkpoint_per_batch_is_exact(folder, tmp_path, monkeypatch,
                                                                                        capsys):
    """Through the executor, every firing of two rows or more streamed (one row per batch) between
    the checkpoints: the golden query's expected output all the same."""
    job = tmp_path / folder
    shutil.copytree(golden.QUERIES / folder, job, ignore=shutil.ignore_patterns("out", golden.DATABASE + "*"))
    monkeypatch.chdir(job)
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 1)
    streamed = []
    rest = FiringStream._rest
    monkeypatch.setattr(FiringStream, "_rest", lambda self, *a: (streamed.append(1), rest(self, *a))[1])
    run = golden.run_checkpointed(capsys)
    assert run.exit_code == 0, run.stderr
    assert streamed  # some firing was read from DuckDB as it was consumed
    golden.check_tables(job / "expected")
    golden.check_printed(job / "expected", run.stdout)

"""Arrow outside DuckDB stays bounded: a window firing streams out in batches, a large snapshot
table is written to Parquet as it is read, and a DuckDB sink stages a checkpoint's rows on a
file past a cap. Each with the rows it had when everything was held whole, whatever the batch
size."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine.checkpoint.state_files import read_subtask_state, write_subtask_state
from weir.engine.connectors import duckdb_table
from weir.engine.connectors.registry import create_sink
from weir.engine.messages import MAX_WATERMARK
from weir.engine.operators import duckdb_sql, window_aggregate
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.firings import FiringStream
from weir.engine.operators.window_aggregate import WindowAggregate
from weir.engine.state.staged import StagedTable
from tests.engine.runtime.test_recovery_at_any_barrier import run, write_input

SECOND = 1_000_000
SCHEMA = pa.schema([("k", pa.int64()), ("window_start", pa.timestamp("us")), ("n", pa.int64()),
                    ("total", pa.int64()), ("mean", pa.float64())])
CONFIG = {
    "window": {"kind": "tumble", "time_column": "ts", "size": 10 * SECOND, "offset": 0},
    "keys": [["k", "k"]],
    "aggregates": [{"name": "n", "function": "count", "argument": None},
                   {"name": "total", "function": "sum", "argument": "v"},
                   {"name": "mean", "function": "avg", "argument": "v"}],
    "having": None,
    "projection": [["k", "k"], ["window_start", "window_start"], ["n", "n"], ["total", "total"],
                   ["mean", "mean"]],
}


def window_op(spill_dir: Path | None = None) -> WindowAggregate:
    op = WindowAggregate(CONFIG, OperatorContext("q.window", SCHEMA, spill_dir=str(spill_dir) if spill_dir else None,
                                                 state_backend="memory"))
    op.open()
    return op


def events(keys: int, start: int = 0) -> pa.RecordBatch:
    """``keys`` keys, two rows each, all in the window [0 s, 10 s)."""
    k = pa.array([i % keys for i in range(start, start + 2 * keys)], pa.int64())
    return pa.RecordBatch.from_pydict({
        "k": k, "v": pa.array(range(start, start + 2 * keys), pa.int64()),
        "ts": pa.array([(i % 9) * SECOND for i in range(2 * keys)], pa.timestamp("us"))})


def expected(keys: int) -> list[dict]:
    return [{"k": k, "window_start": pa.scalar(0, pa.timestamp("us")).as_py(), "n": 2, "total": 2 * k + keys,
             "mean": (2 * k + keys) / 2} for k in range(keys)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=st.integers(1, 300), batch_rows=st.sampled_from([1, 7, 64, 1 << 20]),
       materialize_past=st.sampled_from([0, 10**9]))
def test_a_firing_streams_out_in_bounded_batches_with_the_same_rows(monkeypatch, keys, batch_rows, materialize_past):
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", batch_rows)
    # a large state's firing is grouped into a table first, then sorted as it is read: same rows
    monkeypatch.setattr(window_aggregate, "MATERIALIZE_FIRING_ROWS", materialize_past)
    op = window_op()
    assert op.process_batch(events(keys)) == []
    fired = op.process_watermark(MAX_WATERMARK)
    if keys > 2 * batch_rows:  # more than two batches: read from DuckDB as it is consumed
        assert not isinstance(fired, list)
    batches = list(fired)
    assert all(0 < b.num_rows <= batch_rows and b.schema == SCHEMA for b in batches)
    assert pa.Table.from_batches(batches, SCHEMA).to_pylist() == expected(keys)  # ordered by window end, key
    assert op.state.earliest_slice() is None  # the fired windows were deleted when the stream ended
    assert op.state.run(f"SELECT count(*) FROM duckdb_tables() WHERE table_name = '{window_aggregate.FIRED_TABLE}'") \
        == [(0,)]
    assert op.ctx.metrics["rows_out"] == keys
    op.close()


def test_an_abandoned_stream_still_deletes_what_fired(monkeypatch):
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 10)
    op = window_op()
    op.process_batch(events(100))
    for k in range(7, 37):
        op.process_batch(pa.RecordBatch.from_pydict({"k": [k], "v": [1], "ts": [25 * SECOND]},
                                                    schema=events(1).schema))
    fired = iter(op.process_watermark(15 * SECOND))
    assert next(fired).num_rows == 10  # only the first batch read
    snapshot = op.snapshot()  # the next call into the operator ends the stream first
    rows = snapshot["tables"]["window_accumulators"]
    assert sorted(rows.column("__k0").to_pylist()) == list(range(7, 37))  # only the window at 20 s
    assert list(fired) == []  # the rest of that firing is gone, and never emitted twice
    unread = op.process_watermark(MAX_WATERMARK)  # not even started when the next call comes
    assert op.snapshot()["tables"]["window_accumulators"].num_rows == 0
    assert list(unread) == []
    op.close()


def test_a_large_snapshot_table_is_staged_as_parquet_and_restores_exactly(monkeypatch, tmp_path):
    keys = 500
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 64)
    staged_op, memory_op = window_op(tmp_path / "spill"), window_op()
    for op in (staged_op, memory_op):
        op.process_batch(events(keys))
    staged = staged_op.snapshot()
    table = staged["tables"]["window_accumulators"]
    assert isinstance(table, StagedTable) and table.rows == keys
    assert Path(table.path).parent == tmp_path / "spill" / "snapshots" / "q.window"
    whole = memory_op.snapshot()["tables"]["window_accumulators"]  # no state dir: held as Arrow
    assert isinstance(whole, pa.Table)
    # The checkpoint writer moves the staged file in; read back, it is the Arrow table, types and all.
    handle = write_subtask_state(tmp_path / "chk-1", "q.window", 0, staged)
    assert not Path(table.path).exists()
    assert handle["tables"]["window_accumulators"]["rows"] == keys
    assert handle["tables"]["window_accumulators"]["key_groups"] == [min(whole.column("key_group").to_pylist()),
                                                                     max(whole.column("key_group").to_pylist())]
    back = read_subtask_state(tmp_path / "chk-1", handle, None)
    assert back["tables"]["window_accumulators"].schema == whole.schema
    assert back["tables"]["window_accumulators"].sort_by("__k0").equals(whole.sort_by("__k0"))
    restored = window_op()
    restored.restore(back)
    assert pa.Table.from_batches(list(restored.process_watermark(MAX_WATERMARK)), SCHEMA).to_pylist() == expected(keys)


def test_a_small_snapshot_table_stays_arrow(tmp_path):
    op = window_op(tmp_path / "spill")
    op.process_batch(events(3))
    assert isinstance(op.snapshot()["tables"]["window_accumulators"], pa.Table)


def test_an_operator_opening_again_deletes_snapshot_files_no_checkpoint_took(monkeypatch, tmp_path):
    monkeypatch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 8)
    from weir.engine.state.memory import ManagedMemory
    spill = tmp_path / "spill"
    ctx = OperatorContext("q.window", SCHEMA, spill_dir=str(spill), memory=ManagedMemory(64 << 20, str(spill)))
    op = WindowAggregate(CONFIG, ctx)
    op.process_batch(events(100))
    path = Path(op.snapshot()["tables"]["window_accumulators"].path)
    assert path.exists()
    op.close()
    again = WindowAggregate(CONFIG, OperatorContext("q.window", SCHEMA, spill_dir=str(spill),
                                                     memory=ManagedMemory(64 << 20, str(spill))))
    again.open()
    assert not path.exists()
    again.close()


ROWS = pa.schema([("k", pa.int64()), ("v", pa.string())])


def test_a_duckdb_sink_stages_rows_past_its_cap_on_a_file(monkeypatch, tmp_path):
    monkeypatch.setattr(duckdb_table, "STAGE_IN_MEMORY_BYTES", 1000)
    db = tmp_path / "out.db"
    sink = create_sink({"connector": "duckdb", "path": str(db), "table-name": "results"}, ROWS)
    sink.open()
    batches = [pa.RecordBatch.from_pydict({"k": list(range(i * 50, i * 50 + 50)), "v": ["x" * 20] * 50}, ROWS)
               for i in range(20)]
    for batch in batches[:10]:
        sink.write(batch)
        assert sink._staged_bytes <= 1000 + batch.nbytes  # never more than the cap and one batch
    staging = tmp_path / "out.db.staging"
    assert [p.suffix for p in staging.iterdir()] == [".inprogress"]
    handle = sink.pre_commit(1)
    for batch in batches[10:]:
        sink.write(batch)
    sink.commit(1, handle)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*), sum(k) FROM results").fetchall() == [(500, sum(range(500)))]
    sink.finish()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*), sum(k) FROM results").fetchall() == [(1000, sum(range(1000)))]


def test_a_duckdb_sink_abort_deletes_its_in_progress_file(monkeypatch, tmp_path):
    monkeypatch.setattr(duckdb_table, "STAGE_IN_MEMORY_BYTES", 100)
    db = tmp_path / "out.db"
    sink = create_sink({"connector": "duckdb", "path": str(db), "table-name": "results"}, ROWS)
    sink.open()
    sink.write(pa.RecordBatch.from_pydict({"k": list(range(100)), "v": ["y"] * 100}, ROWS))
    assert any((tmp_path / "out.db.staging").iterdir())
    sink.abort()
    sink.finish()
    assert list((tmp_path / "out.db.staging").iterdir()) == []
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM results").fetchall() == [(0,)]


def run_bounded(directory: Path, batch_size: int, failures: dict, calls: dict[str, int] | None = None):
    """``run`` with one-row output batches and a 1-byte sink cap: every firing of 3+ windows
    streams, every snapshot table of 3+ rows is staged as Parquet, the DuckDB sink stages on a
    file; ``calls`` counts the staged snapshot tables and the streamed firings."""
    calls = {} if calls is None else calls
    stage, stream = duckdb_sql.stage_table, FiringStream._rest

    def counted(name, function):
        def call(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return function(*args, **kwargs)
        return call

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duckdb_sql, "OUTPUT_BATCH_ROWS", 1)
        patch.setattr(duckdb_table, "STAGE_IN_MEMORY_BYTES", 1)
        patch.setattr(duckdb_sql, "stage_table", counted("staged", stage))
        patch.setattr(FiringStream, "_rest", counted("streamed", stream))
        return run(directory, batch_size, failures)


def test_a_job_with_staged_snapshots_and_streamed_firings_recovers_exactly(tmp_path):
    rows = [(k, i, t) for t in (1, 12, 25) for i, k in enumerate("abcdefgh")] + [("a", 5, 59)]
    write_input(tmp_path / "plain", rows)
    write_input(tmp_path / "bounded", rows)
    plain, _ = run(tmp_path / "plain", 4, {})
    calls: dict[str, int] = {}
    bounded, warnings = run_bounded(tmp_path / "bounded", 4, {"batch": {3, 5}}, calls)
    assert sum("restarting from its latest checkpoint" in w for w in warnings) == 2
    assert calls["staged"] > 0 and calls["streamed"] > 0
    assert bounded == plain and len(plain["table"]) == 25
    assert not list((tmp_path / "bounded" / "state").glob("**/snapshots/**/*.parquet"))  # every one was taken


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 99), st.integers(0, 59)),
                     min_size=1, max_size=40),
       batch_size=st.integers(1, 5), fail_at=st.sets(st.integers(1, 12), max_size=2))
def test_any_job_leaving_memory_in_tiny_batches_recovers_exactly(tmp_path_factory, rows, batch_size, fail_at):
    """Through the real executor, a checkpoint after every batch and failures restored from:
    the output is the plain run's, whatever the input, batch size and failures."""
    plain_dir, bounded_dir = tmp_path_factory.mktemp("plain"), tmp_path_factory.mktemp("bounded")
    write_input(plain_dir, rows)
    write_input(bounded_dir, rows)
    plain, _ = run(plain_dir, batch_size, {})
    bounded, _ = run_bounded(bounded_dir, batch_size, {"batch": fail_at})
    assert bounded == plain

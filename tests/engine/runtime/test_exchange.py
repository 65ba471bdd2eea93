"""The exchange between parallel workers: each reads its own splits, rows cross to the
worker owning their key group, barriers align across real channels.

Every job here is compared with the same job at parallelism 1 (or with DuckDB over the
same input): the data keeps within each split's bounded out-of-orderness, so the output
must be identical at every parallelism."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from weir.engine.checkpoint.storage import CheckpointStorage
from weir.engine.errors import EngineError
from weir.engine.runtime.job import JobOptions, run_job
from weir.engine.state.key_groups import subtasks
from weir.planner.planner import plan_script
from weir.sql import parse

ROOT = Path(__file__).resolve().parents[3]
NEXMARK = ROOT / "examples" / "nexmark"


def nexmark_job(query: str, out: Path, events: int = 60_000) -> str:
    """examples/nexmark's tables (smaller, three generator splits) and one query, into csv."""
    ddl = (NEXMARK / "ddl.sql").read_text().replace("'1000000'", f"'{events}'").replace(
        "'first-event.rate' = '10000'", "'first-event.rate' = '2000', 'splits' = '3'")
    sql = (NEXMARK / f"{query}.sql").read_text().replace(
        "'connector' = 'blackhole'", f"'connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv'")
    return ddl + sql


def run(sql: str, tmp: Path, parallelism: int, **settings: str):
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "1000", **settings}
    script = plan_script(parse(sql), db_path=str(tmp / "views.duckdb"), settings=settings)
    return run_job(script.graph, JobOptions(state_dir=tmp / "state"))


def csv_rows(folder: Path) -> list[tuple]:
    return duckdb.sql(f"SELECT * FROM read_csv('{folder}/*.csv') ORDER BY ALL").fetchall()


@pytest.mark.parametrize("query", ["q5", "q8"])
def test_nexmark_queries_that_regroup_by_other_keys_run_in_parallel(tmp_path, query):
    """q5 ranks per-auction counts per window, q8 joins per-(id, name) aggregates on id: a
    keyed operator after another with other keys, refused before the exchange existed."""
    results = {}
    for parallelism in (1, 2):
        tmp = tmp_path / f"p{parallelism}"
        sql = nexmark_job(query, tmp / "out")
        result = run(sql, tmp, parallelism, **{"weir.checkpointing.interval-batches": "4"})
        results[parallelism] = (csv_rows(tmp / "out"), result)
    (one, single), (two, parallel) = results[1], results[2]
    assert len(one) > 10
    assert two == one
    assert parallel.rows_read == single.rows_read
    assert {m.id: m.rows_in for m in parallel.operators} == {m.id: m.rows_in for m in single.operators}
    assert parallel.counter("late_rows_dropped") == single.counter("late_rows_dropped") == 0


# -- skew: every row of one exchange to worker 0, of the other to worker 1 ---------------

SKEWED = """
CREATE TABLE events (k1 VARCHAR, k2 VARCHAR, v BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'parquet');
CREATE MATERIALIZED VIEW by_k1 AS SELECT k1, window_start, COUNT(*) AS n, SUM(v) AS total
FROM TUMBLE(events, ts, INTERVAL '10' SECOND) GROUP BY k1, window_start, window_end;
CREATE MATERIALIZED VIEW by_k2 AS SELECT k2, window_start, COUNT(*) AS n, SUM(v) AS total
FROM TUMBLE(events, ts, INTERVAL '10' SECOND) GROUP BY k2, window_start, window_end;
"""


def key_for_subtask(subtask: int) -> str:
    """A string key whose key group worker ``subtask`` of 2 owns."""
    candidates = [f"key-{i}" for i in range(64)]
    owners = subtasks(pa.record_batch({"k": candidates}), ["k"], 2).to_pylist()
    return candidates[owners.index(subtask)]


def test_skewed_keys_crossing_both_ways_neither_deadlock_nor_lose_rows(tmp_path):
    """All rows of by_k1 belong to worker 0 and all of by_k2 to worker 1, so each worker sends
    half its rows to the other while receiving as much; a tiny exchange buffer makes both
    stop reading their sources again and again. Neither may block the other for good."""
    k1, k2 = key_for_subtask(0), key_for_subtask(1)
    path = tmp_path / "events.parquet"
    rows = 300_000
    duckdb.sql(f"""COPY (SELECT '{k1}' AS k1, '{k2}' AS k2, i AS v,
                          TIMESTAMP '2024-01-01' + to_milliseconds(i * 2 - (hash(i) % 500)::BIGINT) AS ts
                        FROM range({rows}) t(i)) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 20000)""")
    sql = SKEWED.format(path=path)
    result = run(sql, tmp_path, 2, **{"weir.exchange.buffer-size": "64kb",
                                      "weir.checkpointing.interval-batches": "10"})
    con = duckdb.connect(str(tmp_path / "views.duckdb"), read_only=True)
    try:
        views = {v: con.sql(f"SELECT * FROM {v} ORDER BY ALL").fetchall() for v in ("by_k1", "by_k2")}
    finally:
        con.close()
    for view, key in (("by_k1", "k1"), ("by_k2", "k2")):
        expected = duckdb.sql(f"""
            SELECT {key}, time_bucket(INTERVAL 10 SECOND, ts) AS window_start, count(*), sum(v)
            FROM read_parquet('{path}') GROUP BY ALL ORDER BY ALL""").fetchall()
        assert views[view] == expected
    assert result.rows_read == rows
    aggregates = {m.id: m.rows_in for m in result.operators if m.kind == "window_aggregate"}
    assert sorted(aggregates.values()) == [rows, rows]


# -- a worker killed mid-run; recovery at the same and other parallelisms ----------------

JOB = """
CREATE TABLE bids (auction BIGINT, channel VARCHAR, price BIGINT, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '1' SECOND)
WITH ('connector' = 'nexmark', 'first-event.rate' = '2000', 'splits' = '3', 'events' = '40000');
CREATE TABLE hot (auction BIGINT, n BIGINT, window_start TIMESTAMP(3))
WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO hot SELECT auction, n, window_start FROM (
  SELECT *, RANK() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS r FROM (
    SELECT auction, window_start, window_end, COUNT(*) AS n
    FROM TABLE(HOP(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' SECOND, INTERVAL '4' SECOND))
    GROUP BY auction, window_start, window_end)) WHERE r <= 2;
CREATE MATERIALIZED VIEW per_channel AS SELECT channel, window_start, COUNT(*) AS n, SUM(price) AS total
FROM TUMBLE(bids, date_time, INTERVAL '2' SECOND) GROUP BY channel, window_start, window_end;
"""


def outputs(tmp: Path) -> tuple[list, list]:
    con = duckdb.connect(str(tmp / "views.duckdb"), read_only=True)
    try:
        view = con.sql("SELECT * FROM per_channel ORDER BY ALL").fetchall()
    finally:
        con.close()
    return csv_rows(tmp / "out"), view


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("straight")
    run(JOB.format(out=tmp / "out"), tmp, 1)
    return outputs(tmp)


@pytest.mark.parametrize(("fault", "after"), [("commit:3", 2), ("commit:6", 3), ("commit:4", 1), ("batch:40", 2)])
def test_a_worker_killed_mid_run_recovers_from_a_checkpoint_taken_with_rows_in_flight(
        tmp_path, monkeypatch, straight, fault, after):
    """Checkpoints every source batch, while rows cross between workers; a worker is killed
    (SIGKILL) while committing its n-th checkpoint's output, or at its n-th source batch. The
    next run resumes from the latest checkpoint — at parallelism ``after`` — and the output
    is that of one uninterrupted worker."""
    sql = JOB.format(out=tmp_path / "out")
    settings = {"weir.checkpointing.interval-batches": "1", "weir.source.batch-size": "200"}
    monkeypatch.setenv("WEIR_FAULT", fault)  # read by the spawned workers
    with pytest.raises(EngineError, match="died"):
        run(sql, tmp_path, 2, **settings)
    monkeypatch.delenv("WEIR_FAULT")
    written = CheckpointStorage(tmp_path / "state" / "checkpoints").completed()
    if fault.startswith("commit"):
        assert written, "the checkpoint whose commit was interrupted is durable"
    resumed = run(sql, tmp_path, after, **settings)
    assert outputs(tmp_path) == straight
    assert straight[0] and straight[1]
    if written:
        assert resumed.rows_read < 36_800  # it resumed rather than started afresh


# -- the wire and what crosses it -------------------------------------------------------

def test_messages_cross_a_pipe_in_order_with_each_channels_schema_once():
    import multiprocessing

    from weir.engine.runtime.exchange import DATA, WATERMARK, Decoder, Encoder

    receiving, sending = multiprocessing.Pipe(duplex=False)
    encoder, decoder = Encoder(), Decoder(receiving)
    first = pa.record_batch({"a": [1, 2], "s": ["x", None]})
    wider = pa.record_batch({"a": [3], "s": ["y"], "b": [1.5]})
    messages = [encoder.data(4, 1, first), encoder.control(WATERMARK, 4, 1, -5), encoder.data(4, 1, first),
                encoder.data(4, 1, wider)]
    assert [len(m) for m in messages] == [4, 1, 2, 4]  # a schema goes again only when it changes
    for message in messages:
        for part in message:
            sending.send_bytes(part)
    received = [decoder.receive() for _ in messages]
    assert received[1] == (WATERMARK, 4, 1, -5)
    assert [(k, c, i) for k, c, i, _ in received] == [(DATA, 4, 1), (WATERMARK, 4, 1), (DATA, 4, 1), (DATA, 4, 1)]
    assert received[0][3].equals(first) and received[2][3].equals(first) and received[3][3].equals(wider)



def test_a_batch_larger_than_the_pipe_crosses_whole_and_the_end_is_seen_between_messages():
    """The decoder reads the pipe itself (``Connection.send_bytes``'s framing), a body straight into
    Arrow's memory: a batch of several MB arrives whole while the sender is still writing it, and
    the sender's end of the pipe closing between two messages is EOFError, as from ``recv_bytes``."""
    import multiprocessing
    import threading

    from weir.engine.runtime.exchange import DATA, END, Decoder, Encoder

    receiving, sending = multiprocessing.Pipe(duplex=False)
    big = pa.record_batch({"a": pa.array(range(600_000), pa.int64()), "s": [str(i % 97) for i in range(600_000)]})
    encoder = Encoder()
    messages = [encoder.data(0, 0, big), encoder.control(END, 0, 0, 0)]

    def send() -> None:
        for message in messages:
            for part in message:
                sending.send_bytes(part)
        sending.close()

    sender = threading.Thread(target=send)
    sender.start()
    decoder = Decoder(receiving)
    kind, consumer, input_index, batch = decoder.receive()
    assert (kind, consumer, input_index) == (DATA, 0, 0) and batch.equals(big)
    assert decoder.receive() == (END, 0, 0, 0)
    with pytest.raises(EOFError):
        decoder.receive()
    sender.join()

def test_only_the_columns_a_window_aggregate_reads_cross_the_exchange(tmp_path):
    from weir.engine.runtime.exchange import needed_columns

    sql = SKEWED.format(path=tmp_path / "none.parquet").replace(
        "COUNT(*) AS n, SUM(v)", "COUNT(*) AS n, SUM(\"v\") FILTER (WHERE k2 > 'a')", 1)
    graph = plan_script(parse(sql), db_path=str(tmp_path / "v.duckdb")).graph
    source = graph.node("events.source").output_schema
    assert needed_columns(graph.node("by_k1.window_aggregate"), source) is None  # it reads every column
    assert needed_columns(graph.node("by_k2.window_aggregate"), source) == ["k2", "v", "ts"]  # not k1
    assert needed_columns(graph.node("by_k2.sink"), source) is None


def test_a_product_is_no_star_but_a_star_keeps_every_column():
    """Nexmark q1's ``0.908 * "price"`` read as a star made its source generate every column."""
    from weir.engine.graph import OperatorNode
    from weir.engine.operators.calc import CalcConfig
    from weir.engine.runtime.exchange import needed_columns

    schema = pa.schema([("auction", pa.int64()), ("price", pa.int64()), ("url", pa.string()), ("t*x", pa.int64())])

    def read(*sql: str) -> list[str] | None:
        config = CalcConfig(projection=tuple((f"c{i}", text) for i, text in enumerate(sql)))
        return needed_columns(OperatorNode("calc", "calc", config, schema), schema)

    assert read('"auction"', '0.908 * "price"') == ["auction", "price"]
    assert read('"price"*2', '("price") * ("auction")', '"price" ** 2') == ["auction", "price"]
    assert read('"t*x"', "'a*b' || \"url\"") == ["url", "t*x"]
    for star in ("*", '"bid".*', "COUNT(*)", "count( * )", "(SELECT * FROM t)", "COLUMNS(*)"):
        assert read('"auction"', star) is None, star


@pytest.mark.parametrize("parallelism", [2, 3, 11])
def test_split_cuts_by_the_stable_key_groups_and_can_carry_them(parallelism):
    from weir.engine.runtime.exchange import KEY_GROUP_COLUMN, split
    from weir.engine.state.key_groups import key_groups, partition

    batch = pa.record_batch({"k": [f"key-{i % 37}" for i in range(500)], "v": list(range(500))})
    parts = split(batch, ("k",), parallelism, 128)
    assert [p.to_pylist() for p in parts] == [p.to_pylist() for p in partition(batch, ["k"], parallelism, 128)]
    carried = split(batch, ("k",), parallelism, 128, with_key_groups=True)
    for part in carried:
        assert part.column(KEY_GROUP_COLUMN).to_pylist() == key_groups(part, ["k"], 128).to_pylist()


def test_key_groups_travel_only_to_an_aggregate_keyed_by_the_exchange_keys(tmp_path):
    from weir.engine.runtime.exchange import carries_key_groups

    graph = plan_script(parse(SKEWED.format(path=tmp_path / "none.parquet")), db_path=str(tmp_path / "v.duckdb")).graph
    aggregate = graph.node("by_k1.window_aggregate")
    assert carries_key_groups(aggregate, ("k1",))
    assert not carries_key_groups(aggregate, ("k2",))
    assert not carries_key_groups(graph.node("by_k1.sink"), ("k1",))

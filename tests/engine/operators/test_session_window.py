"""SessionWindow against DuckDB gaps-and-islands batch queries on random data.

Two oracles:

- without late rows (watermarks that never close a session a later row reaches),
  the result is DuckDB's gaps and islands over the whole input: per key, sorted
  by time, a new session where a row is more than ``gap`` after the previous one;
- with late rows, which session a row joins depends on what was open when it
  arrived. A small reference model replays the arrivals row by row, as Flink's
  merging window set does (a row joins the open sessions of its key that its
  ``[ts, ts + gap)`` interval intersects; touching none, it is late if that
  interval has closed; a watermark forgets the sessions it fires) and only
  labels rows; DuckDB then aggregates the labelled rows with the same batch query.
"""
from __future__ import annotations

import copy

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from weir.engine.messages import MAX_WATERMARK, MIN_WATERMARK
from weir.engine.operators.base import OperatorContext
from weir.engine.operators.session_window import SessionWindow
from test_window_aggregate_oracle import CONFIG as WINDOW_CONFIG
from test_window_aggregate_oracle import SCHEMA, Rng, cadences, random_bids
from window_harness import SECOND, assert_same_rows, drive, drive_to_end, to_rows

GAP = SECOND
LAG = 1000

CONFIG = copy.deepcopy(WINDOW_CONFIG)
CONFIG["window"] = {"kind": "session", "time_column": "ts", "gap": GAP}

INT_CONFIG = {
    "window": {"kind": "session", "time_column": "ts", "gap": 2 * SECOND},
    "keys": [["auction", "auction"]],
    "aggregates": [
        {"name": "n", "function": "count", "argument": None},
        {"name": "total", "function": "sum", "argument": "price", "filter": "price > 2"},
        {"name": "low", "function": "min", "argument": "price"},
        {"name": "mean", "function": "avg", "argument": "price"},
        {"name": "prices", "function": "count", "argument": "price", "distinct": True},
    ],
    "having": "n > 1 OR prices = 0",
    "projection": [["auction", "auction"], ["window_start", "window_start"], ["window_end", "window_end"],
                   ["n", "n"], ["total", "total"], ["low", "low"], ["mean", "mean"], ["prices", "prices"]],
}
INT_SCHEMA = pa.schema([
    ("auction", pa.int64()), ("window_start", pa.timestamp("us")), ("window_end", pa.timestamp("us")),
    ("n", pa.int64()), ("total", pa.int64()), ("low", pa.int64()), ("mean", pa.float64()),
    ("prices", pa.int64()),
])


def make_session_op(config: dict, schema: pa.Schema, **ctx_args) -> SessionWindow:
    op = SessionWindow(config, OperatorContext("session", schema, **ctx_args))
    op.open()
    return op


def session_oracle(table: pa.Table, config: dict, schema: pa.Schema) -> list[dict]:
    """DuckDB's batch query: sessions per key by gaps and islands (or by a ``__session``
    label column when ``table`` has one), then HAVING and the projection."""
    window = config["window"]
    ts, gap = f'epoch_us("{window["time_column"]}")', window["gap"]
    keys = [f"{sql} AS \"{name}\"" for name, sql in config["keys"]]
    partition = f"PARTITION BY {', '.join(sql for _, sql in config['keys'])}" if config["keys"] else ""
    aggs = []
    for a in config["aggregates"]:
        agg = f"{a['function'].upper()}({'DISTINCT ' if a.get('distinct') else ''}{a.get('argument') or '*'})"
        if a.get("filter"):
            agg += f" FILTER (WHERE {a['filter']})"
        aggs.append(f"{agg} AS \"{a['name']}\"")
    if "__session" in table.column_names:
        islands = f"SELECT *, {ts} AS __ts FROM input WHERE __session IS NOT NULL"
    else:
        islands = f"""
            SELECT *, sum(__new) OVER ({partition} ORDER BY __ts ROWS UNBOUNDED PRECEDING) AS __session
            FROM (SELECT *, {ts} AS __ts,
                         CASE WHEN {ts} - lag({ts}) OVER ({partition} ORDER BY {ts}) <= {gap}
                              THEN 0 ELSE 1 END AS __new
                  FROM input WHERE {ts} IS NOT NULL)"""
    projection = ", ".join(f"{sql} AS \"{name}\"" for name, sql in config["projection"])
    order = ", ".join(["sessions.window_end"] + [f'sessions."{name}"' for name, _ in config["keys"]])
    sql = f"""
        WITH islands AS ({islands}),
        sessions AS (
            SELECT {''.join(k + ', ' for k in keys)}
                   make_timestamp(min(__ts)) AS window_start,
                   make_timestamp(max(__ts) + {gap}) AS window_end,
                   make_timestamp(max(__ts) + {gap - LAG}) AS window_time,
                   {', '.join(aggs)}
            FROM islands GROUP BY {''.join(sql + ', ' for _, sql in config['keys'])}__session)
        SELECT {projection} FROM sessions
        {'WHERE ' + config['having'] if config.get('having') else ''}
        ORDER BY {order}"""
    con = duckdb.connect()
    con.register("input", table)
    result = con.sql(sql).to_arrow_table()
    return result.rename_columns(schema.names).cast(schema).to_pylist()


class ArrivalModel:
    """Which session each row joins, replaying arrivals (see the module docstring)."""

    def __init__(self, gap: int, key):
        self.gap, self.key = gap, key
        self.open: dict[tuple, list[list]] = {}  # key -> [[start, end, label], ...]
        self.members: dict[int, list[int]] = {}  # label -> row numbers
        self.next_label = 0
        self.late = 0

    def batch(self, rows: list[dict], first_row: int, watermark: int) -> None:
        """The rows arrive one after another, all under ``watermark``."""
        times = pa.Table.from_pylist(rows).column("ts").cast(pa.int64()).to_pylist() if rows else []
        for i, (row, ts) in enumerate(zip(rows, times)):
            if ts is not None:
                self.row(self.key(row), ts, first_row + i, watermark)

    def row(self, key, ts: int, number: int, watermark: int) -> None:
        sessions = self.open.setdefault(key, [])
        touching = [s for s in sessions if s[0] <= ts + self.gap and ts <= s[1] and s[1] - LAG > watermark]
        if not touching and ts + self.gap - LAG <= watermark:
            self.late += 1
            return
        label, self.next_label = self.next_label, self.next_label + 1
        self.members[label] = [number, *(r for s in touching for r in self.members.pop(s[2]))]
        sessions[:] = [s for s in sessions if s not in touching]
        sessions.append([min([ts, *(s[0] for s in touching)]), max([ts + self.gap, *(s[1] for s in touching)]), label])

    def fire(self, watermark: int) -> None:
        for key in self.open:
            self.open[key] = [s for s in self.open[key] if s[1] - LAG > watermark]

    def labels(self, n: int) -> pa.Array:
        out = [None] * n
        for label, rows in self.members.items():
            for r in rows:
                out[r] = label
        return pa.array(out, pa.int64())


def bid_key(row: dict) -> tuple:
    return row["auction"], row["kind"].upper() if row["kind"] is not None else None


def run_random_stream(seed: int, config: dict, schema: pa.Schema, key):
    """A random stream of 3,000 bids (times out of order by 2-8 s) in batches of 1-400 rows, with
    watermarks now and then, driven through a session operator and the arrival model: the
    operator, its output, the model and the bids labelled with their sessions."""
    rng = Rng(seed)
    table = random_bids(rng, 3000, disorder=int(rng.integers(2 * SECOND, 8 * SECOND)))
    op = make_session_op(config, schema, max_parallelism=int(rng.integers(1, 200)))
    model = ArrivalModel(GAP, key)
    out, watermark, max_ts, start = [], MIN_WATERMARK, MIN_WATERMARK, 0
    while start < table.num_rows:
        size = int(rng.integers(1, 400))
        batch = table.slice(start, size)
        model.batch(batch.to_pylist(), start, watermark)
        start += size
        out += drive(op, batch.to_batches())
        times = [t for t in batch.column("ts").cast(pa.int64()).to_pylist() if t is not None]
        max_ts = max([max_ts, *times])
        if rng.random() < 0.6:
            watermark = max(watermark, max_ts - int(rng.integers(0, 6 * SECOND)))
            out += op.process_watermark(watermark)
            model.fire(watermark)
    out += drive_to_end(op, [])
    labelled = table.append_column("__session", model.labels(table.num_rows))
    return op, out, model, labelled


@pytest.mark.parametrize("islands_in", ["arrow", "sql"])
@pytest.mark.parametrize("seed", range(6))
def test_random_stream_matches_gaps_and_islands_over_the_sessions_open_at_arrival(seed, islands_in, monkeypatch):
    if islands_in == "sql":  # the path of segments too large to read into Arrow
        monkeypatch.setattr("weir.engine.operators.session_window.ARROW_ISLAND_ROWS", 0)
    op, out, model, labelled = run_random_stream(seed, CONFIG, SCHEMA, bid_key)
    expected = session_oracle(labelled, CONFIG, SCHEMA)
    assert len(expected) > 50
    assert model.late > 0
    assert_same_rows(to_rows(out, SCHEMA), expected)
    assert op.ctx.metrics.get("late_rows_dropped", 0) == model.late
    assert op.ctx.metrics["rows_out"] == len(expected)


#: Keys, arguments and filters that are all input columns: rows are prepared in Arrow, not SQL;
#: with SUM and AVG, and MAX of a double, batch sessions are grouped in SQL.
COLUMNS_CONFIG = {
    **CONFIG,
    "keys": [["auction", "auction"], ["kind", "kind"]],
    "aggregates": [
        {"name": "n", "function": "count", "argument": None},
        {"name": "n_price", "function": "count", "argument": "price"},
        {"name": "total", "function": "sum", "argument": "price"},
        {"name": "low", "function": "min", "argument": "price"},
        {"name": "high", "function": "max", "argument": "ratio"},
        {"name": "mean", "function": "avg", "argument": "price"},
        {"name": "bidders", "function": "count", "argument": "bidder", "distinct": True},
    ],
    "having": None,
    "projection": [["auction", "auction"], ["kind", "kind"], ["window_start", "window_start"],
                   ["window_end", "window_end"], ["n", "n"], ["n_price", "n_price"], ["total", "total"],
                   ["low", "low"], ["high", "high"], ["mean", "mean"], ["bidders", "bidders"]],
}
COLUMNS_SCHEMA = pa.schema([
    ("auction", pa.int64()), ("kind", pa.string()), ("window_start", pa.timestamp("us")),
    ("window_end", pa.timestamp("us")), ("n", pa.int64()), ("n_price", pa.int64()), ("total", pa.int64()),
    ("low", pa.int32()), ("high", pa.float64()), ("mean", pa.float64()), ("bidders", pa.int64()),
])
#: Counts and integer MIN and MAX only: batch sessions of an Arrow segment are reduced in numpy.
COUNTS_CONFIG = {
    **COLUMNS_CONFIG,
    "aggregates": [
        {"name": "n", "function": "count", "argument": None},
        {"name": "n_price", "function": "count", "argument": "price"},
        {"name": "low", "function": "min", "argument": "price"},
        {"name": "high", "function": "max", "argument": "price"},
        {"name": "bidders", "function": "count", "argument": "bidder", "distinct": True},
    ],
    "projection": [["auction", "auction"], ["kind", "kind"], ["window_start", "window_start"],
                   ["window_end", "window_end"], ["n", "n"], ["n_price", "n_price"], ["low", "low"],
                   ["high", "high"], ["bidders", "bidders"]],
}
COUNTS_SCHEMA = pa.schema([
    ("auction", pa.int64()), ("kind", pa.string()), ("window_start", pa.timestamp("us")),
    ("window_end", pa.timestamp("us")), ("n", pa.int64()), ("n_price", pa.int64()), ("low", pa.int32()),
    ("high", pa.int32()), ("bidders", pa.int64()),
])


@pytest.mark.parametrize("config, schema", [(COLUMNS_CONFIG, COLUMNS_SCHEMA), (COUNTS_CONFIG, COUNTS_SCHEMA)],
                         ids=["sums", "counts"])
@pytest.mark.parametrize("seed", range(2))
def test_rows_prepared_from_their_columns_match_gaps_and_islands_too(seed, config, schema, monkeypatch):
    reduced = []
    arrow_batch_sessions = SessionWindow._arrow_batch_sessions
    monkeypatch.setattr(SessionWindow, "_arrow_batch_sessions",
                        lambda self, rows: reduced.append(arrow_batch_sessions(self, rows)) or reduced[-1])
    op, out, model, labelled = run_random_stream(seed, config, schema, lambda row: (row["auction"], row["kind"]))
    assert model.late > 0
    assert_same_rows(to_rows(out, schema), session_oracle(labelled, config, schema))
    assert op.ctx.metrics.get("late_rows_dropped", 0) == model.late
    assert reduced and all((sessions is not None) == (config is COUNTS_CONFIG) for sessions in reduced)


@pytest.mark.parametrize("key, earliest, sessions", [(1, 3, 2), (2, 2, 2), (3, 2, 3)])
def test_the_earliest_end_and_the_open_sessions_kept_after_a_merge_are_the_states(key, earliest, sessions):
    """Read off a merge's candidates unless the session ending first was touched (then asked of
    the state): either way what the state holds (a later end would fire a session too late)."""
    op = make_session_op(COUNT_CONFIG, INT_SCHEMA)  # gap 2 s
    drive(op, [bids([0, 1], [1, 2], [1, 1]), SECOND // 2])  # [0, 2) and [1, 3)
    drive(op, [bids([1.5], [key], [1]), SECOND // 2 + 1])  # extends [0, 2) or [1, 3), or starts [1.5, 3.5)
    state = op._run("SELECT min(__session_end), count(*) FROM session_accumulators")[0]
    assert (op._earliest_end, op._open_sessions) == state == (earliest * SECOND, sessions)


def test_rows_prepared_in_arrow_are_the_rows_sql_prepares(monkeypatch):
    """Keys and arguments that are input columns of types DuckDB returns as they came are taken
    from the batch as they are: the pending rows equal SQL's, NULL times left out."""
    config = {**COLUMNS_CONFIG, "keys": [["auction", '"auction"'], ["kind", "kind"], ["flag", "flag"]],
              "aggregates": [*COLUMNS_CONFIG["aggregates"],
                             {"name": "n_flag", "function": "count", "argument": None, "filter": "flag"}]}
    batch = random_bids(Rng(5), 500, disorder=SECOND).to_batches()[0]
    batch = batch.append_column("flag", pc.greater(batch.column("price"), 40))
    prepared = []
    for in_arrow in (True, False):
        if not in_arrow:
            monkeypatch.setattr(SessionWindow, "_prepared_arrow", lambda self, *args: None)
        op = make_session_op(config, COLUMNS_SCHEMA)
        op.process_batch(batch.slice(0, 100))
        op.process_batch(batch.slice(100))  # arrival numbers after the first batch's
        prepared.append(pa.concat_tables(op._held))
    assert prepared[0].num_rows < batch.num_rows
    assert prepared[0].equals(prepared[1])


def test_without_late_rows_the_model_is_plain_gaps_and_islands():
    """The reference model agrees with the pure batch oracle when nothing is late."""
    rng = Rng(7)
    table = random_bids(rng, 2000, disorder=0).sort_by("ts")
    model = ArrivalModel(GAP, bid_key)
    model.batch(table.to_pylist(), 0, MIN_WATERMARK)
    labelled = table.append_column("__session", model.labels(table.num_rows))
    assert session_oracle(labelled, CONFIG, SCHEMA) == session_oracle(table, CONFIG, SCHEMA)


def ts(*seconds: float) -> pa.Array:
    return pa.array([int(s * SECOND) for s in seconds], pa.timestamp("us"))


def bids(times, auctions, prices) -> pa.RecordBatch:
    return pa.record_batch({"ts": ts(*times), "auction": pa.array(auctions, pa.int64()),
                            "price": pa.array(prices, pa.int64())})


COUNT_CONFIG = {**INT_CONFIG, "having": None}


def sessions(out) -> list[tuple]:
    return [(r["auction"], r["window_start"].second, r["window_end"].second, r["n"])
            for r in to_rows(out, INT_SCHEMA)]


def test_touching_intervals_merge_as_in_flink():
    """[0, 2) and [2, 4) intersect (Flink's TimeWindow.intersects): rows exactly a gap apart share a session."""
    op = make_session_op(COUNT_CONFIG, INT_SCHEMA)
    out = drive_to_end(op, [bids([0, 2, 4.5], [1, 1, 1], [1, 1, 1])])
    assert sessions(out) == [(1, 0, 4, 2), (1, 4, 6, 1)]


def test_a_row_bridging_two_open_sessions_merges_them_and_their_distinct_values():
    op = make_session_op(COUNT_CONFIG, INT_SCHEMA)
    op.process_batch(bids([0, 5], [1, 1], [3, 4]))
    op.process_watermark(int(1.5 * SECOND))  # nothing closed: [0, 2) fires at 2 s - 1 ms
    assert op.con.execute("SELECT count(*) FROM session_accumulators").fetchall() == [(2,)]
    op.process_batch(bids([3], [1], [3]))  # [3, 5) touches [0, 2)? no: 3 > 2; touches [5, 7): yes
    op.process_batch(bids([1.9], [1], [9]))  # behind the watermark but reaches [0, 2) and [3, 7)
    assert "late_rows_dropped" not in op.ctx.metrics
    rows = to_rows(drive_to_end(op, []), INT_SCHEMA)
    assert [(r["window_start"].second, r["window_end"].second, r["n"], r["prices"]) for r in rows] == [(0, 7, 4, 3)]


def test_a_row_whose_own_session_closed_is_late_and_one_after_a_fired_session_starts_anew():
    op = make_session_op(COUNT_CONFIG, INT_SCHEMA)  # gap 2 s
    out = drive(op, [bids([0], [1], [1]), 5 * SECOND])  # [0, 2) fired
    assert sessions(out) == [(1, 0, 2, 1)]
    # Rows wait for a watermark past their own (5 s) to be judged: both closed at arrival, late.
    drive(op, [bids([0.5, 2.5], [1, 1], [1, 1]), int(5.2 * SECOND)])
    assert op.ctx.metrics["late_rows_dropped"] == 2
    out = drive_to_end(op, [bids([1.5], [1], [1]), bids([3.5], [1], [1])])
    assert op.ctx.metrics["late_rows_dropped"] == 3  # [1.5, 3.5) closed; [3.5, 5.5) is open, and new
    assert [(r["window_start"].microsecond, r["n"]) for r in to_rows(out, INT_SCHEMA)] == [(500_000, 1)]


@pytest.mark.parametrize("order, late, expected", [
    ([9, 7.5], 0, [(1, 7, 11, 2), (2, 10, 12, 1)]),  # 7.5 is behind, but [9, 11) is open when it arrives
    ([7.5, 9], 1, [(1, 9, 11, 1), (2, 10, 12, 1)]),  # 7.5 alone has closed: late, though 9 comes next
])
def test_a_row_behind_the_watermark_joins_only_a_session_open_when_it_arrives(order, late, expected):
    """As Flink's merging window set, row after row: the rows after it in its batch do not count."""
    op = make_session_op(COUNT_CONFIG, INT_SCHEMA)
    drive(op, [bids([10], [2], [1]), 10 * SECOND])
    out = drive_to_end(op, [bids(order, [1, 1], [1, 1])])
    assert op.ctx.metrics.get("late_rows_dropped", 0) == late
    assert sessions(out) == expected


def test_fired_sessions_leave_the_state():
    op = make_session_op(INT_CONFIG, INT_SCHEMA)
    op.process_batch(bids([0, 1, 10], [1, 2, 1], [1, 2, 3]))
    op.process_watermark(5 * SECOND)
    assert op.con.execute("SELECT __k0, __session_start FROM session_accumulators").fetchall() == [(1, 10 * SECOND)]
    assert op.con.execute("SELECT count(*) FROM session_distinct_values_0").fetchall() == [(1,)]


# -- properties: batching, watermark cadence and restoring change nothing ---------

rows_strategy = st.lists(
    st.tuples(
        st.integers(-20 * SECOND, 20 * SECOND),              # ts
        st.one_of(st.none(), st.integers(0, 3)),             # auction
        st.one_of(st.none(), st.integers(-5, 10)),           # price
    ),
    min_size=1, max_size=120,
)


def run_stream(table: pa.Table, config: dict, cadence, max_parallelism: int = 128) -> list[dict]:
    """Stream ``table`` as ``cadence`` says; a watermark never closes a session a later row reaches."""
    batches, emit, lags, restore_at = cadence
    times = table.column("ts").cast(pa.int64()).to_pylist()
    op = make_session_op(config, INT_SCHEMA, max_parallelism=max_parallelism)
    out = []
    for i, ((lo, hi), wm, lag) in enumerate(zip(batches, emit, lags)):
        if i == restore_at:
            resumed = make_session_op(config, INT_SCHEMA, max_parallelism=max_parallelism)
            resumed.restore(op.snapshot())
            op.close()
            op = resumed
        out += op.process_batch(table.slice(lo, hi - lo).to_batches()[0])
        if wm and hi < len(times):
            out += op.process_watermark(min(times[hi:]) - LAG - 1 - lag)
    out += drive_to_end(op, [])
    assert "late_rows_dropped" not in op.ctx.metrics
    return to_rows(out, INT_SCHEMA)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batch_sizes_watermark_cadence_and_restores_never_change_the_result(data):
    rows = sorted(data.draw(rows_strategy), key=lambda r: r[0])
    table = pa.table({
        "ts": pa.array([r[0] for r in rows], pa.timestamp("us")),
        "auction": pa.array([r[1] for r in rows], pa.int64()),
        "price": pa.array([r[2] for r in rows], pa.int64()),
    })
    first = run_stream(table, INT_CONFIG, data.draw(cadences(len(rows))))
    second = run_stream(table, INT_CONFIG, data.draw(cadences(len(rows))), data.draw(st.integers(1, 300)))
    assert first == second
    assert_same_rows(first, session_oracle(table, INT_CONFIG, INT_SCHEMA))


def test_snapshots_of_subtasks_merge_and_restore_at_another_parallelism():
    table = random_bids(Rng(3), 1500, disorder=0).sort_by("ts")
    whole = make_session_op(CONFIG, SCHEMA, max_parallelism=16)
    whole.process_batch(table.slice(0, 1000).to_batches()[0])
    whole.process_watermark(MIN_WATERMARK + 1)  # the first batch into sessions
    whole.process_batch(table.slice(1000, 1).to_batches()[0])  # pending until a watermark past MIN + 1
    parts = [make_session_op(CONFIG, SCHEMA, max_parallelism=16, subtask_index=i, parallelism=3) for i in range(3)]
    for part in parts:
        part.restore(whole.snapshot())
    merged = SessionWindow.merge_snapshots([p.snapshot() for p in parts])
    resumed = make_session_op(CONFIG, SCHEMA, max_parallelism=16)
    resumed.restore(merged)
    rest = table.slice(1001).to_batches()
    assert to_rows(drive_to_end(resumed, rest), SCHEMA) == to_rows(drive_to_end(whole, rest), SCHEMA)
    assert sum(p.snapshot()["tables"]["session_accumulators"].num_rows for p in parts) == \
        merged["tables"]["session_accumulators"].num_rows > 0
    assert merged["tables"]["session_pending"].num_rows == 1


def test_rows_with_a_null_time_are_counted_and_dropped():
    op = make_session_op(COUNT_CONFIG, INT_SCHEMA)
    batch = pa.record_batch({"ts": pa.array([None, SECOND], pa.timestamp("us")),
                             "auction": pa.array([1, 1], pa.int64()), "price": pa.array([1, 1], pa.int64())})
    assert sessions(drive_to_end(op, [batch])) == [(1, 1, 3, 1)]
    assert op.ctx.metrics["null_time_rows_dropped"] == 1


def test_max_watermark_fires_everything():
    op = make_session_op(COUNT_CONFIG, INT_SCHEMA)
    op.process_batch(bids([0], [None], [1]))
    assert len(to_rows(op.process_watermark(MAX_WATERMARK), INT_SCHEMA)) == 1

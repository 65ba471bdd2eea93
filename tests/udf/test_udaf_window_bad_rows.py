"""'python.udf.bad-rows.table' and a Python aggregate function whose ``accumulate`` raises in a window
(TUMBLE, HOP, CUMULATE, SESSION) or OVER aggregate: the row goes to the bad-rows table and every
aggregate of the query (COUNT and SUM too) is as if it had been filtered out before the aggregate;
an OVER gives no output row for it. ``engine.operators.bad_aggregate_rows``.

Operators are driven with hypothesis-drawn values, batch sizes, parallelism 1 or 2 (rows routed to
the subtask owning their key group, as the hash exchange does) and a snapshot part-way restored
into new operators; Python computes the oracle over the rows that do not raise. A job then runs
all of them at parallelism 2 with a worker killed and restarted: its views equal DuckDB's batch
queries over the good rows and the bad-rows table holds each raising row once.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_udaf_bad_rows import UDAFS
from test_udf_bad_rows_places import FUNCTIONS, bad_rows_of, run_killed

from weir.engine.operators.base import OperatorContext
from weir.engine.operators.registry import operator_class
from weir.engine.state.key_groups import key_groups, range_for_subtask
from weir.engine.udfs import UdfError
from weir.planner.planner import plan_script
from weir.sql import parse

SECOND = 1_000_000
AGGREGATES = "picky(v) AS p, pickya(v) AS q, COUNT(*) AS n, SUM(v) AS b"
WINDOWS = {
    "tumble": "TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)",
    "hop": "HOP(TABLE a, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)",
    "cumulate": "CUMULATE(TABLE a, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)",
    "session": "SESSION(TABLE a PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' SECOND)",
}
OVERS = {
    "rows": "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW",
    "range": "RANGE BETWEEN INTERVAL '4' SECOND PRECEDING AND CURRENT ROW",
    "unbounded": "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
}


def window_sql(kind: str) -> str:
    return (f"CREATE MATERIALIZED VIEW s AS SELECT k, window_start, window_end, {AGGREGATES} "
            f"FROM TABLE({WINDOWS[kind]}) GROUP BY k, window_start, window_end;")


def over_sql(frame: str) -> str:
    w = f"(PARTITION BY k ORDER BY ts {OVERS[frame]})"
    return (f"CREATE MATERIALIZED VIEW s AS SELECT k, ts, v, picky(v) OVER {w} AS p, pickya(v) OVER {w} AS q, "
            f"COUNT(*) OVER {w} AS n, SUM(v) OVER {w} AS b FROM a;")


@functools.cache
def planned(sql: str):
    return plan_script(parse(FUNCTIONS.format(data="/nowhere") + UDAFS + sql), db_path="/nowhere/r.duckdb",
                       settings={"python.udf.bad-rows.table": "udf_bad_rows"}).graph


def aggregate_node(graph):
    return next(n for n in graph.nodes if n.kind in ("window_aggregate", "session_window", "over_aggregate"))


def rows_of(rows: list[tuple[int, int, int]]) -> pa.Table:
    """(second, k, v) rows as the table ``a``."""
    return pa.table({"ts": pa.array([t * SECOND for t, _, _ in rows], pa.timestamp("us")),
                     "k": pa.array([k for _, k, _ in rows], pa.int64()),
                     "v": pa.array([v for _, _, v in rows], pa.int64())})


class Subtasks:
    """An operator at parallelism ``p``: a subtask per key-group range, each batch's rows routed to
    the subtask owning their key's group (as the hash exchange routes them)."""

    def __init__(self, graph, p: int):
        self.node, self.p = aggregate_node(graph), p
        self.ctxs = [OperatorContext(self.node.id, self.node.output_schema, subtask_index=i, parallelism=p)
                     for i in range(p)]
        self.ops = [operator_class(self.node.kind)(self.node.config, ctx) for ctx in self.ctxs]
        self.out: list[dict] = []
        self.listed: list[tuple[str, dict]] = []

    def process(self, batch: pa.RecordBatch) -> None:
        groups = key_groups(batch, ["k"], 128).to_numpy()
        for i, op in enumerate(self.ops):
            owned = range_for_subtask(i, self.p, 128)
            mine = batch.filter(pa.array([g in owned for g in groups]))
            if mine.num_rows:
                self.out += [r for b in op.process_batch(mine) for r in b.to_pylist()]

    def fire(self, watermark: int) -> None:
        for op in self.ops:
            self.out += [r for b in op.process_watermark(watermark) for r in b.to_pylist()]

    def restarted(self) -> "Subtasks":
        """New operators restored from these ones' snapshots (this one's bad rows collected)."""
        snapshots = [op.snapshot() for op in self.ops]
        again = Subtasks.__new__(Subtasks)
        again.node, again.p, again.ctxs = self.node, self.p, [dataclasses.replace(c, metrics={}, late_output=[])
                                                              for c in self.ctxs]
        again.ops = [operator_class(self.node.kind)(self.node.config, ctx) for ctx in again.ctxs]
        for op, snapshot in zip(again.ops, snapshots):
            op.restore(snapshot)
        again.out, again.listed = self.out, self.listed + self.bad_rows()
        self.close()
        return again

    def bad_rows(self) -> list[tuple[str, dict]]:
        return [row for ctx in self.ctxs for row in bad_rows_of(ctx)]

    def close(self) -> None:
        for op in self.ops:
            op.close()


def run(graph, rows: list[tuple[int, int, int]], batch: int, p: int, cut: int, fire_at: int | None = None):
    """The operator over ``rows`` in batches of ``batch``, a watermark of ``fire_at`` seconds after the
    first ``cut`` batches (none if None), restarted from a snapshot there; then the final watermark.
    Its output rows and the bad rows listed, as (function, v)."""
    subtasks = Subtasks(graph, p)
    parts = rows_of(rows).to_batches(max_chunksize=batch) if rows else []
    for i, part in enumerate(parts):
        if i == cut:
            if fire_at is not None:
                subtasks.fire(fire_at * SECOND)
            subtasks = subtasks.restarted()
        subtasks.process(part)
    subtasks.fire(10_000 * SECOND)
    listed = subtasks.listed + subtasks.bad_rows()
    subtasks.close()
    return subtasks.out, listed


def bad(v: int) -> bool:
    return v % 10 == 5


def expected_listing(rows) -> Counter:
    """Each raising row once: picky (a row at a time) names the row; either function may be the
    one that raised first."""
    return Counter(v for _, _, v in rows if bad(v))


def window_bounds(kind: str, t: int) -> list[tuple[int, int]]:
    """The windows (start, end) in seconds that a row at second ``t`` counts in."""
    if kind == "tumble":
        return [(t // 10 * 10, t // 10 * 10 + 10)]
    if kind == "hop":
        return [(s, s + 10) for s in (t // 5 * 5 - 5, t // 5 * 5)]
    return [(t // 10 * 10, e) for e in (t // 10 * 10 + 5, t // 10 * 10 + 10) if e > t]


def window_oracle(kind: str, rows) -> Counter:
    groups: dict[tuple, list[int]] = {}
    good = sorted((t, k, v) for t, k, v in rows if not bad(v))
    if kind == "session":  # per key, rows closer than the gap (5 s, touching counts) share a session
        by_key: dict[int, list[tuple[int, int]]] = {}
        for t, k, v in good:
            by_key.setdefault(k, []).append((t, v))
        for k, timed in by_key.items():
            session: list[tuple[int, int]] = []
            for t, v in timed + [(None, None)]:
                if session and (t is None or t - session[-1][0] > 5):
                    groups[(k, session[0][0], session[-1][0] + 5)] = [x for _, x in session]
                    session = []
                session.append((t, v))
    else:
        for t, k, v in good:
            for start, end in window_bounds(kind, t):
                groups.setdefault((k, start, end), []).append(v)
    return Counter((k, start, end, sum(vs), sum(vs), len(vs), sum(vs)) for (k, start, end), vs in groups.items())


def window_result(out: list[dict]) -> Counter:
    seconds = (lambda ts: int(ts.timestamp()))
    return Counter((r["k"], seconds(r["window_start"]), seconds(r["window_end"]), r["p"], r["q"], r["n"], r["b"])
                   for r in out)


timed_rows = st.lists(st.tuples(st.integers(0, 29), st.integers(0, 3), st.integers(0, 40)), max_size=24)


@pytest.mark.parametrize("kind", list(WINDOWS))
@settings(max_examples=20, deadline=None)
@given(rows=timed_rows, batch=st.integers(1, 8), p=st.sampled_from([1, 2]), cut=st.integers(0, 4))
def test_a_row_accumulate_raises_on_in_a_window_is_left_out_of_every_aggregate_and_kept_once(kind, rows, batch, p,
                                                                                             cut):
    """picky and pickya raise in accumulate on a v ending in 5: whatever the batches, the parallelism
    and a restart from a snapshot, every window's COUNT(*), SUM and both functions are those of its
    other rows (a session is made of the other rows: a bad row bridges nothing), and the bad-rows
    table holds each raising row once."""
    graph = planned(window_sql(kind))
    assert aggregate_node(graph).config.bad_rows
    out, listed = run(graph, rows, batch, p, cut)
    assert window_result(out) == window_oracle(kind, rows)
    assert Counter(row["v"] for _, row in listed) == expected_listing(rows)
    assert {function for function, _ in listed} <= {"picky (accumulate)", "pickya (accumulate)"}
    assert all(set(row) == {"ts", "k", "v"} for _, row in listed)  # the input row, as it came


def over_oracle(frame: str, rows) -> Counter:
    """DuckDB's window functions over the rows that do not raise (equal times ordered by v, as weir
    orders a partition's peers by all their columns)."""
    good = [(t, k, v) for t, k, v in rows if not bad(v)]
    spec = OVERS[frame].replace("INTERVAL '4' SECOND", "4")
    sql = (f"SELECT k, t, v, SUM(v) OVER w, SUM(v) OVER w, COUNT(*) OVER w, SUM(v) OVER w FROM good "
           f"WINDOW w AS (PARTITION BY k ORDER BY t{', v' if frame == 'rows' else ''} {spec})")
    con = duckdb.connect()
    con.execute("CREATE TABLE good (t BIGINT, k BIGINT, v BIGINT)")
    if good:
        con.executemany("INSERT INTO good VALUES (?, ?, ?)", good)
    return Counter(con.sql(sql).fetchall())


@pytest.mark.parametrize("frame", list(OVERS))
@settings(max_examples=20, deadline=None)
@given(rows=timed_rows, batch=st.integers(1, 8), p=st.sampled_from([1, 2]), cut=st.integers(0, 4))
def test_a_row_accumulate_raises_on_over_a_frame_gives_no_output_and_is_left_out_of_every_frame(
        frame, rows, batch, p, cut):
    """OVER ROWS, RANGE and UNBOUNDED frames: a row picky or pickya raises on has no output row and
    is in no other row's frame (COUNT(*) and SUM neither), as if filtered out before the OVER;
    whatever the batches, the parallelism, and a firing part-way and a restart from a snapshot
    there. Rows come in time order and that firing is before the time of the rows still to come,
    so that none is late."""
    rows = sorted(rows)
    graph = planned(over_sql(frame))
    assert aggregate_node(graph).config.bad_rows
    before = rows[:cut * batch]
    out, listed = run(graph, rows, batch, p, cut, before[-1][0] - 1 if before else None)
    # the operator's output: the input's columns (ts, k, v), then picky, pickya, COUNT(*) and SUM
    assert Counter((k, int(ts.timestamp()), v, *over) for ts, k, v, *over in (r.values() for r in out)) \
        == over_oracle(frame, rows)
    assert Counter(row["v"] for _, row in listed) == expected_listing(rows)
    assert {function for function, _ in listed} <= {"picky (accumulate)", "pickya (accumulate)"}


def test_without_the_setting_accumulate_in_a_window_fails_the_job_naming_the_row_the_key_and_the_setting():
    graph = planned(window_sql("tumble"))
    node = aggregate_node(graph)
    op = operator_class(node.kind)(dataclasses.replace(node.config, bad_rows=False),
                                   OperatorContext(node.id, node.output_schema))
    with pytest.raises(UdfError) as raised:
        op.process_batch(rows_of([(0, 0, 3), (1, 1, 15)]).to_batches()[0])
    op.close()
    assert "picky (accumulate) failed on the row (15) of the group with the key (1): ValueError: no 15" \
        in raised.value.message
    assert "keep such rows in a table with SET 'python.udf.bad-rows.table' = 'udf_bad_rows'" in raised.value.hint


def test_retract_raising_as_a_row_leaves_an_over_frame_fails_the_job_saying_why_the_row_is_not_kept():
    graph = planned("CREATE FUNCTION pickyr AS 'udaf_functions.PickyRetract' LANGUAGE PYTHON; "
                    "CREATE MATERIALIZED VIEW s AS SELECT k, ts, v, pickyr(v) OVER (PARTITION BY k ORDER BY ts "
                    "ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS p FROM a;")
    node = aggregate_node(graph)
    op = operator_class(node.kind)(node.config, OperatorContext(node.id, node.output_schema))
    with pytest.raises(UdfError) as raised:
        op.process_batch(rows_of([(0, 1, 7), (1, 1, 1), (2, 1, 2)]).to_batches()[0])
        list(op.process_watermark(60 * SECOND))
    op.close()
    assert "pickyr (retract) failed on the row (7) of the group with the key (1)" in raised.value.message
    assert "only a row accumulate raises on can be left out of an OVER aggregate" in raised.value.hint


# -- a job: windows, a session and OVER, checkpointed, a worker killed ----------------------------------

JOB = UDAFS + """
CREATE TABLE tumbled (k BIGINT, window_start TIMESTAMP(3), p BIGINT, n BIGINT, b BIGINT)
WITH ('connector' = 'filesystem', 'path' = '{out}/tumbled', 'format' = 'csv');
INSERT INTO tumbled SELECT k, window_start, picky(v), COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end;
CREATE MATERIALIZED VIEW sessions AS SELECT k, window_start, window_end, pickya(v) AS q, COUNT(*) AS n
FROM TABLE(SESSION(TABLE a PARTITION BY k, DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY k, window_start, window_end;
CREATE MATERIALIZED VIEW running AS SELECT k, ts, v, picky(v) OVER (PARTITION BY k ORDER BY ts
ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS p FROM a;
"""
ROWS = 40


def test_bad_rows_of_window_session_and_over_aggregates_are_kept_exactly_once_after_a_restart(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    for part in range(2):  # two splits: at parallelism 2 each worker reads one
        rows = "".join(f"2024-01-01 00:00:{i:02d},{i % 3},{i * 7 % 40}\n" for i in range(part, ROWS, 2))
        (tmp_path / "a" / f"part-{part}.csv").write_text("ts,k,v\n" + rows)
    db = run_killed(tmp_path, monkeypatch, JOB.format(out=tmp_path / "out"))  # worker 1 killed, restarted
    oracle = duckdb.connect()
    oracle.execute(f"CREATE VIEW a AS SELECT * FROM read_csv('{tmp_path}/a/*.csv', header = true); "
                   "CREATE VIEW good AS SELECT * FROM a WHERE v % 10 <> 5")
    tumbled = oracle.sql(f"SELECT * FROM read_csv('{tmp_path}/out/tumbled/*.csv') ORDER BY ALL").fetchall()
    assert tumbled == oracle.sql("SELECT k, time_bucket(INTERVAL '10 seconds', ts), sum(v), count(*), sum(v) FROM good "
                                 "GROUP BY ALL ORDER BY ALL").fetchall()
    with duckdb.connect(str(db), read_only=True) as con:
        sessions = con.sql("SELECT * FROM sessions ORDER BY ALL").fetchall()
        running = con.sql("SELECT * FROM running ORDER BY ALL").fetchall()
        kept = con.sql("SELECT weir_operator, weir_function, weir_row FROM udf_bad_rows").fetchall()
    # each key's good rows are 3 s apart at most where v ends in 5 was left out: sessions by gaps
    assert sessions == oracle.sql(
        "SELECT k, min(ts), max(ts) + INTERVAL '2 seconds', sum(v), count(*) FROM (SELECT *, sum(new) OVER "
        "(PARTITION BY k ORDER BY ts) AS island FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (PARTITION BY k "
        "ORDER BY ts) <= INTERVAL '2 seconds' THEN 0 ELSE 1 END AS new FROM good)) GROUP BY k, island "
        "ORDER BY ALL").fetchall()
    assert running == oracle.sql("SELECT k, ts, v, sum(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING "
                                 "AND CURRENT ROW) FROM good ORDER BY ALL").fetchall()
    raising = [v for v, in oracle.sql("SELECT v FROM a WHERE v % 10 = 5").fetchall()]
    assert raising  # the input has bad rows
    operators = {o for o, _, _ in kept}
    assert len(operators) == 3  # the window, the session and the OVER aggregate each kept theirs
    for operator in operators:  # each raising row once per operator: none lost, none twice
        assert Counter(json.loads(r)["v"] for o, _, r in kept if o == operator) == Counter(raising), operator


def test_a_session_snapshot_taken_without_the_setting_restores_with_it_and_back():
    """The pending rows of a session window carry their input row with the setting only: a snapshot
    taken without it (a savepoint of an earlier job) restores into an operator with it, which keeps a
    later bad row, and its snapshot restores into one without the setting."""
    node = aggregate_node(planned(window_sql("session")))

    def session(bad_rows: bool, snapshot=None):
        ctx = OperatorContext(node.id, node.output_schema)
        op = operator_class(node.kind)(dataclasses.replace(node.config, bad_rows=bad_rows), ctx)
        if snapshot is not None:
            op.restore(snapshot)
        return op, ctx

    first, _ = session(False)
    first.process_batch(rows_of([(0, 1, 3), (2, 1, 4)]).to_batches()[0])
    second, ctx = session(True, first.snapshot())
    first.close()
    second.process_batch(rows_of([(4, 1, 15), (6, 1, 6)]).to_batches()[0])
    third, _ = session(False, second.snapshot())
    out = [r for b in second.process_watermark(60 * SECOND) for r in b.to_pylist()]
    second.close()
    assert window_result(out) == Counter({(1, 0, 11, 13, 13, 3, 13): 1})
    listed = bad_rows_of(ctx)
    assert [row["v"] for _, row in listed] == [15] and listed[0][0] in ("picky (accumulate)", "pickya (accumulate)")
    third.process_batch(rows_of([(8, 1, 1)]).to_batches()[0])
    with pytest.raises(UdfError, match="picky \\(accumulate\\) failed on the row \\(15\\)"):
        list(third.process_watermark(60 * SECOND))  # without the setting the bad row fails the job
    third.close()

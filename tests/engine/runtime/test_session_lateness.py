"""SESSION windows decide lateness row after row, as Flink's merging window set does, and the
result never depends on 'weir.source.batch-size' or on how the splits (files) interleave.

The oracle replays the rows one by one in the order (arrival watermark, file, position): a row
joins the sessions of its key that its ``[ts, ts + gap)`` touches and that are still open under
its watermark (``end - 1 ms > watermark``); touching none, it is late when its own window has
closed. For one file that is the file's order, Flink's answer exactly. Each file's times are
distinct modulo the number of files, so that two files never share a watermark (beyond the
start, where no row can be late) and the order is the same for every interleaving.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings, strategies as st

from weir.engine.runtime.job import JobOptions, run_job
from weir.planner.planner import plan_script
from weir.sql import parse

GAP_MS, DELAY_MS, LAG_MS = 3000, 2000, 1
JOB = """
CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH ('connector' = 'filesystem', 'path' = '{dir}/events', 'format' = 'csv');
CREATE MATERIALIZED VIEW sessions AS
SELECT k, window_start, window_end, COUNT(*) AS cnt, SUM(v) AS total
FROM TABLE(SESSION(TABLE events PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND))
GROUP BY k, window_start, window_end;
"""


def oracle(files: list[list[tuple[int, str, int]]]) -> tuple[list[tuple], int]:
    rows = []
    for f, file in enumerate(files):
        watermark = None
        for position, (ts, k, v) in enumerate(file):
            rows.append((float("-inf") if watermark is None else watermark, f, position, ts, k, v))
            watermark = max(ts - DELAY_MS, watermark if watermark is not None else ts - DELAY_MS)
    sessions: dict[str, list[list]] = {}  # k -> [[start, end, count, total], ...]
    late = 0
    for watermark, _, _, ts, k, v in sorted(rows):
        mine = sessions.setdefault(k, [])
        touching = [s for s in mine if s[0] <= ts + GAP_MS and ts <= s[1] and s[1] - LAG_MS > watermark]
        if not touching and ts + GAP_MS - LAG_MS <= watermark:
            late += 1
            continue
        for s in touching:
            mine.remove(s)
        mine.append([min([ts, *(s[0] for s in touching)]), max([ts + GAP_MS, *(s[1] for s in touching)]),
                     1 + sum(s[2] for s in touching), v + sum(s[3] for s in touching)])
    return sorted((k, *s) for k, mine in sessions.items() for s in mine), late


def clock(ms: int) -> str:
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def run(directory: Path, files, batch_size: int) -> tuple[list[tuple], int]:
    events = directory / "events"
    events.mkdir(exist_ok=True)
    for f, file in enumerate(files):
        lines = ["ts,k,v"] + [f"2024-01-01 {clock(ts)},{k},{v}" for ts, k, v in file]
        (events / f"part-{f}.csv").write_text("\n".join(lines) + "\n")
    work = Path(tempfile.mkdtemp(prefix=f"run-{batch_size}-", dir=directory))
    db = work / "job.duckdb"
    script = plan_script(parse(JOB.format(dir=directory)), db_path=str(db),
                         settings={"weir.source.batch-size": str(batch_size)})
    result = run_job(script.graph, JobOptions(state_dir=work / "state"))
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.sql("SELECT k, epoch_ms(window_start) - epoch_ms(TIMESTAMP '2024-01-01'), "
                       "epoch_ms(window_end) - epoch_ms(TIMESTAMP '2024-01-01'), cnt, total "
                       "FROM sessions ORDER BY ALL").fetchall()
    return rows, result.counter("late_rows_dropped")


@st.composite
def inputs(draw):
    """1–3 files of rows mostly moving forward, some a little behind (joining an open session
    or not) and some far behind (late); file f's times are f modulo the number of files."""
    count = draw(st.integers(1, 3))
    files = []
    for f in range(count):
        steps = draw(st.lists(st.tuples(st.integers(-6, 4), st.sampled_from("ab"), st.integers(1, 9)),
                              min_size=1, max_size=14))
        at, file = 5000, []
        for step, k, v in steps:
            at = max(0, at + step * 700)
            file.append((at - at % count + f, k, v))
            at = max(at, file[-1][0]) if step > 0 else at - step * 700 - 100  # behind once, then forward
        files.append(file)
    return files


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=inputs(), batch_size=st.sampled_from([1, 2, 3, 7, 65536]))
def test_sessions_are_flinks_at_every_batch_size_and_number_of_files(tmp_path_factory, files, batch_size):
    directory = tmp_path_factory.mktemp("sessions")
    assert run(directory, files, batch_size) == oracle(files)


def test_a_row_behind_its_watermark_joins_only_a_session_open_when_it_arrives(tmp_path):
    """Gap 3 s, delay 2 s: 12.5 s moves the watermark to 10.5 s; 7.4 s arrives next, its own window
    [7.4 s, 10.4 s) closed and no session of `a` open: late, though 9.0 s, read after it in the same
    batch, would reach it. 9.0 s itself starts a session. Flink drops 7.4 s (one split)."""
    files = [[(1000, "a", 1), (12500, "a", 2), (7400, "a", 4), (9000, "a", 8)]]
    assert oracle(files) == ([("a", 1000, 4000, 1, 1), ("a", 9000, 12000, 1, 8), ("a", 12500, 15500, 1, 2)], 1)
    for batch_size in (1, 4):
        assert run(tmp_path, files, batch_size) == oracle(files)

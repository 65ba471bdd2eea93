"""`weir run` of unbounded jobs as a user runs them: it runs until Ctrl-C or SIGTERM, which stop it
at a checkpoint with its output committed; the same command resumes it, and the output stays
exact across those stops, a SIGKILL, and new input arriving meanwhile."""
from __future__ import annotations

import csv
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import duckdb
import pyarrow as pa

from weir.engine.connectors.registry import create_source

WEIR = shutil.which("weir")
DEADLINE_SECONDS = 180

WATCHED_JOB = """
CREATE TABLE events (k STRING, v BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'in', 'format' = 'csv', 'source.monitor-interval' = '100ms');
CREATE TABLE copied (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = 'out', 'format' = 'csv');
INSERT INTO copied SELECT k, v FROM events;
"""

# With 'seed' set, row i's event time is 2024-01-01 + i / 500 s: every 1 s window has 500 rows.
GENERATED_JOB = """
CREATE TABLE clicks (user_id INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
WITH ('connector' = 'datagen', 'rows-per-second' = '500', 'seed' = '1',
      'fields.user_id.min' = '1', 'fields.user_id.max' = '9');
CREATE MATERIALIZED VIEW per_second AS
SELECT window_start, COUNT(*) AS clicks, SUM(user_id) AS users
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' SECOND))
GROUP BY window_start, window_end;
"""


def start(cwd: Path, *args: str, **kwargs) -> subprocess.Popen:
    """`weir run job.sql` in a process group of its own, as a shell runs a command."""
    kwargs = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.Popen([WEIR, "run", "job.sql", "--no-progress", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                            text=True, start_new_session=True, **kwargs)


def signal_job(process: subprocess.Popen, signum: int) -> None:
    """SIGINT as Ctrl-C sends it, to the whole process group (the workers too); SIGTERM to the
    process only, as `kill PID` or a service manager sends it."""
    if signum == signal.SIGINT:
        os.killpg(process.pid, signum)
    else:
        process.send_signal(signum)


def stop(process: subprocess.Popen, signum: int) -> tuple[int, str, str]:
    signal_job(process, signum)
    out, err = process.communicate(timeout=DEADLINE_SECONDS)
    return process.returncode, out, err


def wait_for(condition, what: str, process: subprocess.Popen):
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not (found := condition()):
        if process.poll() is not None:
            raise AssertionError(f"the job ended before {what}: {process.communicate()}")
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE_SECONDS} s"
        time.sleep(0.05)
    return found


def arrive(directory: Path, name: str, rows: list[tuple[str, int]]) -> None:
    temporary = directory / f".{name}.tmp"
    temporary.write_text("k,v\n" + "".join(f"{k},{v}\n" for k, v in rows))
    os.replace(temporary, directory / name)


def committed_rows(directory: Path) -> list[tuple[str, int]]:
    """The rows of the sink's published part files (in-progress files are hidden by their names)."""
    rows = []
    for path in sorted(directory.glob("part-*")):
        with path.open() as file:
            rows += [(r["k"], int(r["v"])) for r in csv.DictReader(file)]
    return sorted(rows)


def test_watched_files_are_copied_exactly_once_across_a_sigkill_and_a_sigterm(tmp_path):
    (tmp_path / "job.sql").write_text(WATCHED_JOB)
    (tmp_path / "in").mkdir()
    batches = {name: [(name, n) for n in range(3)] for name in ("a", "b", "c")}
    arrive(tmp_path / "in", "a.csv", batches["a"])
    job = start(tmp_path)
    wait_for(lambda: committed_rows(tmp_path / "out") == batches["a"], "output of a.csv", job)
    job.kill()  # SIGKILL: no last checkpoint
    job.wait()
    arrive(tmp_path / "in", "b.csv", batches["b"])  # arrives while the job is down
    job = start(tmp_path, "--parallelism", "2")  # one worker watches the directory
    arrive(tmp_path / "in", "c.csv", batches["c"])
    expected = sorted(batches["a"] + batches["b"] + batches["c"])
    wait_for(lambda: committed_rows(tmp_path / "out") == expected, "output of every file", job)
    code, out, err = stop(job, signal.SIGTERM)
    assert code == 0, err
    assert "stopped with checkpoint" in out and "run the same command again to resume" in out
    assert committed_rows(tmp_path / "out") == expected


def view(db: Path) -> list[tuple]:
    try:
        con = duckdb.connect(str(db), read_only=True)
    except duckdb.Error:  # not created yet, or a commit holds it this instant
        return []
    try:
        return con.sql("SELECT window_start, clicks, users FROM per_second ORDER BY window_start").fetchall()
    except duckdb.CatalogException:
        return []
    finally:
        con.close()


def test_ctrl_c_stops_at_a_checkpoint_and_the_rerun_resumes_at_parallelism_two(tmp_path):
    (tmp_path / "job.sql").write_text(GENERATED_JOB)
    db = tmp_path / "weir.duckdb"
    job = start(tmp_path)
    wait_for(lambda: len(view(db)) >= 2, "two windows in the view", job)
    code, out, err = stop(job, signal.SIGINT)
    assert code == 130, err  # 128 + SIGINT, as shells expect of an interrupted command
    assert "SIGINT: taking a last checkpoint" in err and "stopped with checkpoint" in out
    first = view(db)
    assert len(first) >= 2
    job = start(tmp_path, "--parallelism", "2")  # the same command (at another parallelism) resumes
    wait_for(lambda: len(view(db)) >= len(first) + 2, "more windows after the restart", job)
    code, out, err = stop(job, signal.SIGINT)
    assert code == 130, err
    rows = view(db)
    assert rows[: len(first)] == first  # what was committed stays
    assert rows == oracle(len(rows))  # every window once, none lost, none twice


def oracle(windows: int) -> list[tuple]:
    """The view over the first ``windows`` seconds of the generated rows, computed in DuckDB from
    rows the datagen source makes here (they are a function of the seed and the row index)."""
    schema = pa.schema([("user_id", pa.int32()), ("ts", pa.timestamp("us"))])
    options = {"connector": "datagen", "rows-per-second": "500", "seed": "1", "number-of-rows": str(500 * windows),
               "fields.user_id.min": "1", "fields.user_id.max": "9"}
    source = create_source(options, schema)
    clicks = pa.Table.from_batches([batch for batch, _ in source.read("0")], schema=schema)
    return duckdb.sql("""SELECT time_bucket(INTERVAL 1 SECOND, ts) AS window_start, COUNT(*), SUM(user_id)
                         FROM clicks GROUP BY 1 ORDER BY 1""").fetchall()


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:  # the thread has ended since the listing
            continue
    return found


def workers(pid: int) -> list[int]:
    """The worker processes of job ``pid``: the children of its fork server (a child of ``pid``
    running multiprocessing's forkserver, engine/runtime/workers.py)."""
    found = []
    for child in _children(pid):
        try:
            if b"forkserver" in Path(f"/proc/{child}/cmdline").read_bytes():
                found += _children(child)
        except OSError:  # it has ended meanwhile
            pass
    return found


def test_a_second_ctrl_c_stops_at_once(tmp_path):
    """The last checkpoint cannot complete (a worker holds its barrier back): the second Ctrl-C
    cancels the job instead of waiting for it."""
    (tmp_path / "job.sql").write_text(GENERATED_JOB)
    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err:
        job = start(tmp_path, "--parallelism", "2", stderr=err, env={**os.environ, "WEIR_FAULT": "inject:1:stall"})
        # As soon as the workers exist, while they start (importing the engine): they must not die of it.
        wait_for(lambda: len(workers(job.pid)) == 2, "two worker processes", job)
        signal_job(job, signal.SIGINT)
        wait_for(lambda: "taking a last checkpoint" in err_file.read_text(), "the first signal's answer", job)
        signal_job(job, signal.SIGINT)
        job.communicate(timeout=DEADLINE_SECONDS)
    assert job.returncode == 130
    said = err_file.read_text()
    assert said.rstrip().endswith("interrupted") and "died" not in said and "Traceback" not in said, said


def test_the_live_example_plans_into_a_window_over_datagen(weir):
    example = Path(__file__).resolve().parents[2] / "examples" / "live.sql"
    outcome = weir("explain", str(example))
    assert outcome.code == 0, outcome.err
    assert "datagen" in outcome.out and "page_views" in outcome.out

"""Golden end-to-end queries: each folder of ``tests/queries/`` runs as a job and
must give exactly its expected output.

A folder holds:

- ``query.sql``: the job, with paths relative to the folder (sources under
  ``data/``, filesystem sinks under ``out/<table>``);
- ``data/``: small input files;
- ``expected/<name>.csv``: the rows (with a header, in any order) of the
  filesystem sink writing ``out/<name>``, or else of the materialized view
  ``<name>`` in the job's DuckDB database (maintained by upsert for an updating
  query: its final rows). A 'debezium-json' sink is compared by the rows its
  changes leave when applied in order to an empty table. Every sink directory and every
  view must have one;
- ``expected/types.json`` (optional): ``{name: {column: DuckDB type}}`` for
  columns of views and parquet sinks, whose files keep their types;
- ``expected/print.txt`` (optional): the lines the print sinks write, in any
  order; without it, a job must print no row at all;
- ``expected/summary.json`` (optional): ``late_rows_dropped`` and
  ``malformed_rows_skipped`` (both 0 unless given), ``late_rows_by_source``
  (``{table: rows}``, none unless given) and ``sink_rows_in`` (``{table: rows}``)
  as the job's summary reports them;
- ``oracle/<name>.sql``: the DuckDB batch query over ``data/`` that confirms
  ``expected/<name>.csv`` independently of weir (``oracle/print.sql``: one
  column, the lines of ``expected/print.txt``).

Each folder runs in every mode of ``RUN_MODES`` against the same expected
output:

- ``straight``: once, start to end, in this process;
- ``checkpointed``: in this process with small source batches and a
  checkpoint after every batch (a folder whose query sets its own
  'weir.source.batch-size' keeps it: its late rows depend on it). Small is
  ``SMALL_BATCHES`` rows, or, for an input file of more rows than ``MAX_BATCHES``
  such batches, enough rows for ``MAX_BATCHES`` batches: a checkpoint commits every
  sink (a view's opens its database), so 200 cost five times what 40 cost, and 40
  cost ~1.3-2x what 20 cost in the heaviest folders;
- ``parallel``: in this process at parallelism 2 (two worker processes exchanging rows by
  key group), with small source batches and a checkpoint after every batch, so that
  watermarks and barriers cross the exchange many times (``PARALLEL_BATCHING`` lists the
  folders whose printed intermediate changes depend on batching there: for them the state
  the printed changelog leaves is compared);
- ``killed``: in a subprocess, killed with SIGKILL (``WEIR_FAULT``) at
  seeded-random points — first at a batch boundary, then while the restored
  job writes or commits its second checkpoint — and started again until it
  finishes, so that the last attempt restores a checkpoint a restored attempt
  wrote. Each kill
  must really happen: the points are drawn from the fault points an uninterrupted
  run reaches, counted in the folder's ``checkpointed`` run (or, without one, in a
  run of its own). Printed rows are at-least-once by design, so here they
  are compared as a set: every expected line printed by some attempt, no
  other line. The summary of the last attempt counts only what that attempt
  did, so its counts are not compared in this mode.

``WEIR_TEST_SEED`` changes the kill points (default 0); a failure names them.

A folder's runs are one ``xdist_group``: under ``pytest -n`` they share a worker and run
in the order above, so that the killed run always finds the counts of the checkpointed
run before it (counting in a run of its own doubles the killed run's cost).
"""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from unittest import mock

import duckdb
import pyarrow.parquet as pq
import pytest

from weir.engine import faults
from weir.shell.cli import main

QUERIES = Path(__file__).parent / "queries"
FOLDERS = sorted(p.name for p in QUERIES.iterdir() if (p / "query.sql").is_file())
DATABASE = "weir.duckdb"
PRINTED_ROW = re.compile(r"^(\S+> )?[+-][IUD]\[.*\]$")
SUMMARY_COUNTS = re.compile(r"late rows dropped: ([\d,]+); malformed rows skipped: ([\d,]+)")
LATE_BY_SOURCE = re.compile(r"late rows dropped per source: (.*)$", re.M)
OPERATOR_LINE = re.compile(r"^\s+(\S+)\s+([\d,]+|-)\s+([\d,]+|-)\s+([\d,]+|-)$")
READERS = {"csv": "read_csv", "json": "read_json", "parquet": "read_parquet"}


# -- running a job -------------------------------------------------------------------


@dataclass
class JobRun:
    exit_code: int
    stdout: str
    stderr: str
    #: False when the job ran in several attempts: the last one's summary counts only its own part.
    summary_covers_job: bool = True
    #: True when printed rows may repeat (a restored print sink prints again what followed its checkpoint).
    printed_at_least_once: bool = False


RUN = ["run", "query.sql", "--db", DATABASE, "--no-progress"]
CHECKPOINT_EVERY_BATCH = ["--set", "weir.checkpointing.interval-batches=1"]
PARALLEL = ["--set", "parallelism.default=2"]
#: Folders whose printed changelog's intermediate changes depend on batching at parallelism 2,
#: and why. At 2 a worker gathers the rows an exchange brings over several source batches
#: before it hands them to the operator (``SubtaskExecutor._flush``), and an updating
#: aggregate folds a key's changes within what it is handed, so it prints fewer intermediate
#: changes. As in Flink, where the changes printed depend on the data flow (and mini-batch):
#: what is guaranteed, and compared here (``check_changelog_state``), is that the changelog
#: is valid (every -U/-D takes back a row printed before it) and leaves the same rows as
#: expected/print.txt. Lateness no longer depends on batching: it is judged per row.
PARALLEL_BATCHING = {
    "print_changelog": "fewer intermediate changes printed at parallelism 2",
}
SMALL_BATCHES = 2
#: An input file of more than SMALL_BATCHES * MAX_BATCHES rows is read in MAX_BATCHES batches.
MAX_BATCHES = 20
#: Folders whose expected output holds for some batch sizes only, and the size to use
#: (none since lateness is judged per row).
BATCH_SIZES: dict[str, int] = {}
CHECKPOINTS_COMPLETED = re.compile(r"checkpoints: (\d+) completed")
#: Where a checkpoint is written or committed; reached at least once in every run (its final checkpoint).
CHECKPOINT_POINTS = ("snapshot-write", "before-metadata", "after-metadata", "commit")
#: Kills at a batch boundary before the one at a checkpoint point. One: a second one made the
#: last attempt restore a checkpoint that a restored attempt wrote, which the checkpoint-point
#: kill now does by landing in the restored attempt's second checkpoint (``kill_plan``); each
#: kill costs a process start, a plan and a restore.
KILLS_AT_BATCHES = 1
SEED = os.environ.get("WEIR_TEST_SEED", "0")


def batch_settings() -> list[str]:
    """Small source batches, unless the query sets its own batch size (its expected
    late rows depend on the batch boundaries; a --set would override its SET)."""
    if "weir.source.batch-size" in Path("query.sql").read_text():
        return []
    return ["--set", f"weir.source.batch-size={BATCH_SIZES.get(Path.cwd().name, small_batch_size())}"]


def small_batch_size() -> int:
    """SMALL_BATCHES rows, or for a larger input file as many as make MAX_BATCHES batches of it."""
    rows = max((input_rows(path) for path in Path("data").rglob("*") if path.is_file()), default=0)
    return max(SMALL_BATCHES, -(-rows // MAX_BATCHES))


def input_rows(path: Path) -> int:
    """The rows of an input file (a text file's lines: at most one more than its rows)."""
    if path.suffix == ".parquet":
        return pq.ParquetFile(path).metadata.num_rows
    with path.open("rb") as file:
        return sum(1 for _ in file)


def run_straight(capsys: pytest.CaptureFixture) -> JobRun:
    """Run the job once, start to end, in the current directory."""
    code = main(RUN)
    captured = capsys.readouterr()
    return JobRun(code, captured.out, captured.err)


#: {folder: how often its checkpointed run reached each fault point}: the killed run's plan
#: comes from these counts; without them (the checkpointed run not run before, or failed) it
#: counts them in a run of its own.
FAULT_POINTS_REACHED: dict[str, Counter] = {}


def run_checkpointed(capsys: pytest.CaptureFixture) -> JobRun:
    """Run the job once with small batches and a checkpoint after every batch."""
    reached: Counter = Counter()
    with mock.patch.object(faults, "reach", lambda point: reached.update([point])):
        code = main([*RUN, *batch_settings(), *CHECKPOINT_EVERY_BATCH])
    captured = capsys.readouterr()
    if code == 0:
        FAULT_POINTS_REACHED[Path.cwd().name] = reached
        completed = CHECKPOINTS_COMPLETED.findall(captured.out)
        assert completed and int(completed[0]) >= 2, f"the job took no periodic checkpoint:\n{captured.out}"
    return JobRun(code, captured.out, captured.err)


def run_parallel(capsys: pytest.CaptureFixture) -> JobRun:
    """Run the job once at parallelism 2, with small batches and a checkpoint after every
    batch, in a subprocess (so that what the workers' print sinks write is captured too)."""
    settings = [*batch_settings(), *CHECKPOINT_EVERY_BATCH, *PARALLEL]
    env = {k: v for k, v in os.environ.items() if k != "WEIR_FAULT"}
    attempt = subprocess.run([sys.executable, "-m", "weir.shell.cli", *RUN, *settings], env=env,
                             capture_output=True, text=True, timeout=120)
    return JobRun(attempt.returncode, attempt.stdout, attempt.stderr)


def count_fault_points(settings: list[str], capsys: pytest.CaptureFixture) -> Counter:
    """How often an uninterrupted run (final checkpoint only) reaches each fault point,
    run in a scratch copy of the job: batch boundaries, and per checkpoint the
    operators snapshotted, the metadata written and the sinks committed."""
    scratch = Path.cwd().parent / f"{Path.cwd().name}-count"
    shutil.copytree(Path.cwd(), scratch)
    reached: Counter = Counter()
    here = Path.cwd()
    os.chdir(scratch)
    try:
        with mock.patch.object(faults, "reach", lambda point: reached.update([point])):
            code = main([*RUN, *settings])
    finally:
        os.chdir(here)
        shutil.rmtree(scratch)
    captured = capsys.readouterr()
    assert code == 0, f"the counting run failed:\n{captured.err}"
    return reached


def kill_plan(reached: Counter, rng: random.Random) -> list[tuple[str, int]]:
    """Seeded (point, n) pairs, each sure to be reached by the attempt it is given to.

    An attempt killed at batch boundary n resumes from a checkpoint taken at
    boundary n - 1 or earlier, so the next attempt still has at least
    ``remaining - (n - 1)`` boundaries, and a checkpoint after each. The last kill is at
    a checkpoint point, counted per checkpoint (operators snapshotted, sinks committed:
    the same at every checkpoint): in the restored attempt's second checkpoint when it
    has two boundaries ahead, so that the attempt after it restores a checkpoint written
    by a restored attempt; else in its first (every attempt writes and commits at least
    its final checkpoint)."""
    plan = []
    remaining = reached["batch"]
    for _ in range(KILLS_AT_BATCHES):
        if remaining < 2:
            break
        n = rng.randint(2, remaining - 1 if remaining > 2 else remaining)
        plan.append(("batch", n))
        remaining -= n - 1
    point = rng.choice(CHECKPOINT_POINTS)
    per_checkpoint = max(1, reached[point] // max(1, reached["after-metadata"]))
    earlier = per_checkpoint if plan and remaining >= 2 else 0  # the first checkpoint's passes
    plan.append((point, earlier + rng.randint(1, per_checkpoint)))
    return plan


def run_killed(capsys: pytest.CaptureFixture) -> JobRun:
    """Run the job in subprocesses killed at seeded-random points, then once more to the end."""
    settings = [*batch_settings(), *CHECKPOINT_EVERY_BATCH]
    reached = FAULT_POINTS_REACHED.get(Path.cwd().name) or count_fault_points(settings, capsys)
    plan = kill_plan(reached, random.Random(f"{SEED}:{Path.cwd().name}"))
    command = [sys.executable, "-m", "weir.shell.cli", *RUN, *settings]
    stdout, stderr = [], []
    for point, n in [*plan, (None, 0)]:
        env = {k: v for k, v in os.environ.items() if k != "WEIR_FAULT"}
        if point is not None:
            env["WEIR_FAULT"] = f"{point}:{n}"
        attempt = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        stdout.append(attempt.stdout)
        stderr.append(attempt.stderr)
        if point is None:
            return JobRun(attempt.returncode, "".join(stdout), "".join(stderr),
                          summary_covers_job=False, printed_at_least_once=True)
        assert attempt.returncode == -signal.SIGKILL, (
            f"kill plan {plan} (WEIR_TEST_SEED={SEED}): WEIR_FAULT={point}:{n} did not kill the job "
            f"(exit {attempt.returncode})\n{attempt.stdout}{attempt.stderr}"
        )
    raise AssertionError("unreachable")


RUN_MODES: dict[str, Callable[[pytest.CaptureFixture], JobRun]] = {
    "straight": run_straight,
    "checkpointed": run_checkpointed,
    "parallel": run_parallel,
    "killed": run_killed,
}


# -- reading results back ----------------------------------------------------------------


def sink_files(directory: Path) -> tuple[str, list[str]]:
    """The format and the published part files of a filesystem sink directory."""
    files = sorted(str(p) for p in directory.iterdir() if not p.name.startswith((".", "_")))
    assert files, f"the sink {directory} published no file"
    extensions = {Path(f).suffix.lstrip(".") for f in files}
    assert len(extensions) == 1 and extensions <= set(READERS), f"unexpected files in {directory}: {files}"
    return extensions.pop(), files


def actual_relation(con: duckdb.DuckDBPyConnection, name: str) -> duckdb.DuckDBPyRelation:
    """The rows of the sink ``out/<name>`` or, without that directory, of the view ``<name>``.
    A sink of Debezium changes is compared by the rows its changes leave (``applied_changes``)."""
    directory = Path("out") / name
    if directory.is_dir():
        fmt, files = sink_files(directory)
        relation = con.sql(f"SELECT * FROM {READERS[fmt]}($files)", params={"files": files})
        if fmt == "json" and sorted(relation.columns) == ["after", "before", "op"]:
            return applied_changes(con, files)
        return relation
    return con.sql(f'SELECT * FROM job."{name}"')


def applied_changes(con: duckdb.DuckDBPyConnection, files: list[str]) -> duckdb.DuckDBPyRelation:
    """The rows that Debezium changes leave when applied to an empty table: each 'c'
    adds its ``after`` row, each 'd' removes its ``before`` row (which must be there)."""
    con.execute("""CREATE OR REPLACE TEMP TABLE applied AS
        SELECT row, CAST(SUM(sign) AS BIGINT) AS n FROM (
            SELECT after AS row, 1 AS sign FROM read_json($files) WHERE op = 'c'
            UNION ALL SELECT before, -1 FROM read_json($files) WHERE op = 'd') GROUP BY row""",
                {"files": files})
    negative = con.sql("SELECT row FROM applied WHERE n < 0").fetchall()
    assert negative == [], f"changes delete rows that were never inserted: {negative}"
    return con.sql("SELECT UNNEST(row) FROM applied, range(n)")


def expected_relation(con: duckdb.DuckDBPyConnection, path: Path, like: duckdb.DuckDBPyRelation):
    """``path``'s rows, read with the column names and types of ``like``."""
    with path.open() as file:
        header = file.readline().strip().split(",")
    assert header == like.columns, f"{path.name}: expected columns {header}, got {like.columns}"
    columns = {name: str(t) for name, t in zip(like.columns, like.types)}
    return con.sql(
        "SELECT * FROM read_csv($path, header = true, auto_detect = false, columns = $columns)",
        params={"path": str(path), "columns": columns},
    )


def sorted_rows(relation: duckdb.DuckDBPyRelation) -> list[tuple]:
    return sorted(relation.fetchall(), key=lambda row: [(v is None, str(v)) for v in row])


def column_types(relation: duckdb.DuckDBPyRelation) -> dict[str, str]:
    return {name: str(t) for name, t in zip(relation.columns, relation.types)}


def summary_counts(stdout: str) -> tuple[int, int]:
    found = SUMMARY_COUNTS.findall(stdout)
    assert len(found) == 1, f"no summary line in the output:\n{stdout}"
    late, malformed = found[0]
    return int(late.replace(",", "")), int(malformed.replace(",", ""))


def sink_rows_in(stdout: str) -> dict[str, int]:
    """{table: rows in} of the sink operators in the summary table."""
    rows = {}
    for line in stdout.splitlines():
        match = OPERATOR_LINE.match(line)
        if match and match.group(1).endswith(".sink"):
            rows[match.group(1).removesuffix(".sink")] = int(match.group(2).replace(",", ""))
    return rows


def printed_rows(stdout: str) -> list[str]:
    return sorted(line for line in stdout.splitlines() if PRINTED_ROW.match(line))


CHANGE = re.compile(r"^(\S+> )?([+-][IUD])(\[.*\])$")


def changelog_state(lines: list[str], *, in_order: bool) -> Counter:
    """The rows a printed changelog leaves: +I/+U add a row, -U/-D take one back. In order
    (as printed), a row taken back must be there; the lines of an expected file are sorted,
    so for them only the totals count."""
    state: Counter = Counter()
    for line in lines:
        prefix, kind, row = CHANGE.match(line).groups()
        row = f"{prefix or ''}{row}"
        if kind in ("+I", "+U"):
            state[row] += 1
        else:
            assert not in_order or state[row] > 0, f"{line} takes back a row that is not there"
            state[row] -= 1
    return +state


def check_changelog_state(expected: Path, stdout: str) -> None:
    """The printed changelog is valid and leaves the rows expected/print.txt leaves (see
    PARALLEL_BATCHING): its intermediate changes may differ."""
    printed = [line for line in stdout.splitlines() if PRINTED_ROW.match(line)]
    want = (expected / "print.txt").read_text().splitlines()
    assert changelog_state(printed, in_order=True) == changelog_state(want, in_order=False)


# -- the tests ---------------------------------------------------------------------------


def test_there_are_golden_queries():
    assert len(FOLDERS) >= 10


def golden_runs() -> list:
    """(folder, run mode) for every folder and mode, a folder's runs one xdist group."""
    return [pytest.param(folder, mode, marks=pytest.mark.xdist_group(f"golden-{folder}"))
            for folder in FOLDERS for mode in RUN_MODES]


@pytest.mark.parametrize(("folder", "run_mode"), golden_runs())
def test_golden_query(folder: str, run_mode: str, tmp_path: Path, monkeypatch, capsys):
    job = tmp_path / folder
    shutil.copytree(QUERIES / folder, job, ignore=shutil.ignore_patterns("out", DATABASE + "*"))
    monkeypatch.chdir(job)

    run = RUN_MODES[run_mode](capsys)

    assert run.exit_code == 0, f"weir run failed:\n{run.stderr}"
    expected = job / "expected"
    check_tables(expected)
    if run_mode == "parallel" and folder in PARALLEL_BATCHING:
        check_changelog_state(expected, run.stdout)
    else:
        check_printed(expected, run.stdout, at_least_once=run.printed_at_least_once)
    if run.summary_covers_job:
        check_summary(expected, run.stdout)


def check_tables(expected: Path) -> None:
    names = sorted(p.stem for p in expected.glob("*.csv"))
    types = json.loads((expected / "types.json").read_text()) if (expected / "types.json").exists() else {}
    con = duckdb.connect()
    if Path(DATABASE).exists():
        con.execute(f"ATTACH '{DATABASE}' AS job (READ_ONLY)")
        views = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'job'").fetchall()}
    else:
        views = set()
    produced = {p.name for p in Path("out").iterdir()} if Path("out").is_dir() else set()
    produced |= {v for v in views if not v.startswith("_weir")}
    assert produced == set(names), "every sink and view needs an expected/<name>.csv, and vice versa"
    leftovers = [str(p) for p in Path("out").rglob(".*")] if Path("out").is_dir() else []
    assert leftovers == [], f"in-progress files left behind: {leftovers}"

    for name in names:
        actual = actual_relation(con, name)
        want = expected_relation(con, expected / f"{name}.csv", actual)
        assert sorted_rows(actual) == sorted_rows(want), f"rows of {name}"
        if name in types:
            declared = column_types(actual)
            assert {c: declared.get(c) for c in types[name]} == types[name], f"column types of {name}"
    assert set(types) <= set(names), "types.json names a table without expected rows"


def check_printed(expected: Path, stdout: str, *, at_least_once: bool = False) -> None:
    path = expected / "print.txt"
    want = sorted(path.read_text().splitlines()) if path.exists() else []
    if at_least_once:
        assert set(printed_rows(stdout)) == set(want), "printed rows, as a set (duplicates allowed)"
    else:
        assert printed_rows(stdout) == want


def check_summary(expected: Path, stdout: str) -> None:
    path = expected / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    late, malformed = summary_counts(stdout)
    assert late == summary.get("late_rows_dropped", 0), "late rows dropped"
    assert malformed == summary.get("malformed_rows_skipped", 0), "malformed rows skipped"
    by_source = {}
    for line in LATE_BY_SOURCE.findall(stdout):
        for item in line.split(", "):
            source, count = item.rsplit(" ", 1)
            by_source[source] = int(count.replace(",", ""))
    assert by_source == summary.get("late_rows_by_source", {}), "late rows dropped per source"
    reported = sink_rows_in(stdout)
    for table, rows in summary.get("sink_rows_in", {}).items():
        assert reported.get(table) == rows, f"rows into the sink {table}: {reported}"


@pytest.mark.parametrize("folder", FOLDERS)
def test_expected_output_agrees_with_duckdb_batch_query(folder: str, monkeypatch):
    """The expected files were written by hand; a batch query over the same inputs confirms them."""
    directory = QUERIES / folder
    monkeypatch.chdir(directory)
    oracles = sorted(p for p in (directory / "oracle").glob("*.sql") if p.stem != "print")
    assert {p.stem for p in oracles} == {p.stem for p in (directory / "expected").glob("*.csv")}
    con = duckdb.connect()
    for oracle in oracles:
        batch = con.sql(oracle.read_text())
        want = expected_relation(con, directory / "expected" / f"{oracle.stem}.csv", batch)
        assert sorted_rows(batch) == sorted_rows(want), f"{oracle.name} disagrees with expected/{oracle.stem}.csv"
    printed = directory / "oracle" / "print.sql"
    if printed.exists():
        lines = sorted(row[0] for row in con.sql(printed.read_text()).fetchall())
        assert lines == sorted((directory / "expected" / "print.txt").read_text().splitlines())


def test_issue_job_view_answers_weir_query(tmp_path: Path, monkeypatch, capsys):
    """The issue's flow: `weir run` the job, then `weir query` its view as csv."""
    job = tmp_path / "issue_job"
    shutil.copytree(QUERIES / "issue_job", job)
    monkeypatch.chdir(job)
    assert run_straight(capsys).exit_code == 0

    code = main(["query", "SELECT * FROM channel_minutes ORDER BY window_start, bids DESC, channel",
                 "--db", DATABASE, "--format", "csv"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    (tmp_path / "answer.csv").write_text(captured.out)
    con = duckdb.connect()
    expected = con.sql("SELECT * FROM read_csv('expected/channel_minutes.csv', header = true)")
    answer = expected_relation(con, tmp_path / "answer.csv", expected)
    assert answer.fetchall() == con.sql(
        "SELECT * FROM read_csv('expected/channel_minutes.csv', header = true) ORDER BY window_start, bids DESC, channel"
    ).fetchall()

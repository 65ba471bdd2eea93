"""Recovery end to end: `weir run` in subprocesses killed (SIGKILL) at every fault
point, restarted over corrupt or incompatible checkpoints, restarted in-run by
its restart strategy, stopped with a savepoint and resumed.

The job reads 24 rows (one every 2 s, keys a/b/c) two rows per batch and counts
them per key and 10-second window into csv and parquet part files and into a
materialized view. Every recovered run must give, row for row, what an
uninterrupted run gives; while a job lies killed, readers see only output of
completed checkpoints.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

from weir.engine.checkpoint.storage import CheckpointStorage
from weir.shell.cli import main

JOB_NAME = "job"
DATABASE = "weir.duckdb"
SINKS = ("key_windows", "key_windows_pq")
VIEW = "window_totals"
CHECKPOINT_EVERY_BATCH = ["--set", "weir.checkpointing.interval-batches=1"]
RESTART_NOW = ["--set", "restart-strategy.type=fixed-delay", "--set", "restart-strategy.fixed-delay.delay=0s"]
#: 24 rows two per batch: 12 batches and the boundary where the source ends.
BATCH_BOUNDARIES = 13

JOB = """\
SET 'weir.source.batch-size' = '2';

CREATE TABLE events (
  ts TIMESTAMP(3), k VARCHAR, v BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH ('connector' = 'filesystem', 'path' = 'data/events.csv', 'format' = 'csv');

CREATE TABLE key_windows (k VARCHAR, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/key_windows', 'format' = 'csv');

CREATE TABLE key_windows_pq (k VARCHAR, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)
WITH ('connector' = 'filesystem', 'path' = 'out/key_windows_pq', 'format' = 'parquet');

INSERT INTO key_windows
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

INSERT INTO key_windows_pq
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;

CREATE MATERIALIZED VIEW window_totals AS
SELECT window_start, window_end, COUNT(*) AS cnt, SUM(v) AS total
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end;
"""

EVENTS = "ts,k,v\n" + "".join(f"2024-01-01 00:00:{2 * i:02d},{'abc'[i % 3]},{i}\n" for i in range(24))


# -- a job in a folder -----------------------------------------------------------------


def make_job(directory: Path, sql: str = JOB) -> Path:
    (directory / "data").mkdir(parents=True)
    (directory / "data" / "events.csv").write_text(EVENTS)
    (directory / f"{JOB_NAME}.sql").write_text(sql)
    return directory


def weir(directory: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    """`weir ARGS` in ``directory``, in a subprocess, with WEIR_FAULT=``fault`` if given."""
    env = {k: v for k, v in os.environ.items() if k != "WEIR_FAULT"}
    if fault is not None:
        env["WEIR_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "weir.shell.cli", *args], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=120)


def run(directory: Path, *settings: str, fault: str | None = None) -> subprocess.CompletedProcess:
    return weir(directory, "run", f"{JOB_NAME}.sql", "--db", DATABASE, "--no-progress", *settings, fault=fault)


def run_killed(directory: Path, *settings: str, fault: str) -> subprocess.CompletedProcess:
    result = run(directory, *settings, fault=fault)
    assert result.returncode == -signal.SIGKILL, (
        f"WEIR_FAULT={fault} did not kill the job (exit {result.returncode}):\n{result.stdout}{result.stderr}"
    )
    return result


def run_to_end(directory: Path, *settings: str, fault: str | None = None) -> subprocess.CompletedProcess:
    result = run(directory, *settings, fault=fault)
    assert result.returncode == 0, f"weir run failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
    return result


# -- what readers see -----------------------------------------------------------------------


def visible_files(directory: Path, sink: str) -> list[Path]:
    """A sink's published files: everything not hidden (in-progress files start with '.')."""
    folder = directory / "out" / sink
    return sorted(p for p in folder.iterdir() if not p.name.startswith((".", "_"))) if folder.is_dir() else []


def outputs(directory: Path) -> dict[str, list[tuple]]:
    """The rows a reader sees now in each sink's part files and in the view, as sorted lists
    (so that a duplicate shows)."""
    con = duckdb.connect()
    seen = {}
    for sink in SINKS:
        files = [str(p) for p in visible_files(directory, sink)]
        reader = "read_parquet" if sink.endswith("_pq") else "read_csv"
        seen[sink] = sorted(con.sql(f"SELECT * FROM {reader}($files)", params={"files": files}).fetchall()) \
            if files else []
    seen[VIEW] = []
    if (directory / DATABASE).exists():
        con.execute(f"ATTACH '{directory / DATABASE}' AS job (READ_ONLY)")
        tables = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'job'").fetchall()}
        if VIEW in tables:
            seen[VIEW] = sorted(con.sql(f"SELECT * FROM job.{VIEW}").fetchall())
    con.close()
    return seen


def assert_no_leftovers(directory: Path) -> None:
    """After a successful run: no in-progress part files and no staged view rows remain."""
    leftovers = [str(p) for sink in SINKS for p in (directory / "out" / sink).iterdir() if p.name.startswith(".")]
    staging = directory / f"{DATABASE}.staging"
    leftovers += [str(p) for p in staging.iterdir()] if staging.is_dir() else []
    leftovers += [str(p) for p in directory.glob(f"{DATABASE}.weir-next-*")]  # a killed publish's
    assert leftovers == []


def sub_multiset(part: list[tuple], whole: list[tuple]) -> bool:
    return not (Counter(part) - Counter(whole))


def checkpoints(directory: Path) -> CheckpointStorage:
    return CheckpointStorage(directory / ".weir" / JOB_NAME / "checkpoints")


def assert_only_completed_output(directory: Path, reference: dict[str, list[tuple]]) -> None:
    """What a reader sees while the job lies killed: part of the final output, nothing twice,
    no file that is not complete, and no window that only a checkpoint after the newest
    completed one could have fired (a window fires when the watermark reaches its end - 1 ms)."""
    seen = outputs(directory)
    for name, rows in seen.items():
        assert sub_multiset(rows, reference[name]), f"{name}: rows that are not in the final output, or twice"
    for sink in SINKS:
        for path in visible_files(directory, sink):
            assert path.suffix in (".csv", ".parquet"), f"a visible file that is not a part file: {path}"
    latest = checkpoints(directory).latest()
    fired = [row for name, rows in seen.items() for row in rows]
    if latest is None:
        assert fired == [], "output visible before any checkpoint completed"
        return
    if latest.metadata.get("finished"):
        return  # the final checkpoint: the end of the input fired every window
    watermark = min(w for position in latest.metadata["sources"].values()
                    for w in position["split_watermarks"].values())
    horizon = datetime.fromtimestamp(watermark / 1e6, tz=timezone.utc).replace(tzinfo=None) + timedelta(milliseconds=1)
    for name, rows in seen.items():
        ends = [row[2] if name in SINKS else row[1] for row in rows]
        assert all(end <= horizon for end in ends), \
            f"{name} shows a window ending after {horizon}, past the newest completed checkpoint"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, list[tuple]]:
    """The output of one uninterrupted run, without checkpoints."""
    directory = make_job(tmp_path_factory.mktemp("uninterrupted"))
    run_to_end(directory)
    seen = outputs(directory)
    assert all(seen.values()) and all(len(set(rows)) == len(rows) for rows in seen.values()), seen
    assert len(seen["key_windows"]) == 15 and len(seen[VIEW]) == 5, seen
    return seen


# -- killed at every fault point ---------------------------------------------------------------

KILLS = {
    # id: (WEIR_FAULT, settings). With a checkpoint every batch, checkpoints 1, 2, ... are taken
    # during the job; without, the only checkpoint is the final one.
    "batch 4": ("batch:4", CHECKPOINT_EVERY_BATCH),
    "last batch boundary": (f"batch:{BATCH_BOUNDARIES}", CHECKPOINT_EVERY_BATCH),
    "writing the first snapshot": ("snapshot-write:1", CHECKPOINT_EVERY_BATCH),
    "writing a later snapshot": ("snapshot-write:8", CHECKPOINT_EVERY_BATCH),
    "before metadata": ("before-metadata:3", CHECKPOINT_EVERY_BATCH),
    "after metadata": ("after-metadata:3", CHECKPOINT_EVERY_BATCH),
    "between two sinks' commits": ("commit:4", CHECKPOINT_EVERY_BATCH),
    "publishing the view's snapshot: written, not renamed": ("publish:3", CHECKPOINT_EVERY_BATCH),
    "publishing the view's snapshot: renamed, staged files not deleted": ("published:3", CHECKPOINT_EVERY_BATCH),
    "final checkpoint: before metadata": ("before-metadata:1", []),
    "final checkpoint: after metadata": ("after-metadata:1", []),
    "final checkpoint: between two sinks' commits": ("commit:2", []),
    "final checkpoint: after the last sink's commit": ("commit:3", []),
}


@pytest.mark.parametrize("case", list(KILLS))
def test_a_job_killed_at_a_fault_point_restarts_to_the_uninterrupted_output(case, tmp_path, reference):
    fault, settings = KILLS[case]
    directory = make_job(tmp_path)
    run_killed(directory, *settings, fault=fault)
    assert_only_completed_output(directory, reference)

    run_to_end(directory, *settings)

    assert outputs(directory) == reference
    assert_no_leftovers(directory)


def test_killed_after_the_final_checkpoint_the_next_run_commits_it_and_the_one_after_changes_nothing(
        tmp_path, reference):
    directory = make_job(tmp_path)
    run_killed(directory, fault="after-metadata:1")
    assert outputs(directory) == {name: [] for name in reference}, "the final output is visible before its commit"

    finishing = run_to_end(directory)
    assert "had already finished" in finishing.stdout
    assert outputs(directory) == reference
    # the final checkpoint holds positions and sink handles, no operator state: nothing restores it
    final = checkpoints(directory).latest()
    assert final.metadata["finished"] and final.metadata["operators"] == {} and final.metadata["sinks"]

    again = run_to_end(directory)
    assert "had already finished" in again.stdout and "--fresh" in again.stdout, again.stdout
    assert outputs(directory) == reference


def test_killed_several_times_in_one_job_the_output_is_still_exact(tmp_path, reference):
    directory = make_job(tmp_path)
    for fault in ("batch:3", "after-metadata:2", "batch:4", "commit:2", "before-metadata:2"):
        run_killed(directory, *CHECKPOINT_EVERY_BATCH, fault=fault)
        assert_only_completed_output(directory, reference)
    run_to_end(directory, *CHECKPOINT_EVERY_BATCH)
    assert outputs(directory) == reference
    assert_no_leftovers(directory)


# -- incomplete, corrupt and incompatible checkpoints --------------------------------------------


#: How the job is killed before its newest checkpoint is damaged: while that checkpoint's
#: output is still staged (right after its metadata), or once it is published. Both use
#: batches of 6 rows: batch 1 fires no window (watermark 9 s), so checkpoint 1 has no
#: output. Staged: the kill comes right after the second checkpoint's metadata, before its
#: commit, so whatever the background writer's timing nothing is published yet. Published:
#: the kill comes right after the third sink committed the second checkpoint, taken at
#: boundary 2 or later (windows fired), before a newer checkpoint was begun.
NEWEST = {
    "output staged": ("after-metadata:2", ["--set", "weir.source.batch-size=6"]),
    "output published": (f"commit:{2 * 3}", ["--set", "weir.source.batch-size=6"]),
}


def killed_with_two_checkpoints(directory: Path, newest: str) -> tuple[int, Path, list[str]]:
    """Kill the job after two checkpoints completed: (newest id, its folder, the settings)."""
    fault, batches = NEWEST[newest]
    settings = [*CHECKPOINT_EVERY_BATCH, *batches]
    run_killed(directory, *settings, fault=fault)
    completed = checkpoints(directory).completed()
    assert len(completed) >= 2, f"only {[c.id for c in completed]} completed before the kill"
    published = any(outputs(directory).values())
    assert published == (newest == "output published"), f"published output: {outputs(directory)}"
    return completed[0].id, Path(completed[0].path), settings


def state_file(folder: Path) -> Path:
    """A parquet state file of the checkpoint, or its state.json where no window is open."""
    files = sorted(folder.rglob("*.parquet")) or sorted(folder.rglob("state.json"))
    assert files, f"no state in {folder}"
    return files[0]


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


CORRUPTIONS = {"truncated state file": truncate, "a flipped byte": flip_a_byte}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_newest_checkpoint_is_skipped_with_a_warning(corruption, tmp_path, reference):
    """Its output was still staged: skipping it and resuming from the one before is exact."""
    directory = make_job(tmp_path)
    newest, folder, settings = killed_with_two_checkpoints(directory, "output staged")
    CORRUPTIONS[corruption](state_file(folder))

    result = run_to_end(directory, *settings)

    assert re.search(rf"warning: .*checkpoint {newest}\b.*skipped", result.stderr), result.stderr
    assert outputs(directory) == reference
    assert_no_leftovers(directory)


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_checkpoint_whose_output_was_published_is_skipped_and_that_output_withdrawn(
        corruption, tmp_path, reference):
    """Resuming from the checkpoint before it publishes that output again: the part files it
    published (the sinks' commit logs say which) are deleted first, and the view, kept by key,
    takes the same changes again. Nothing ends up twice."""
    directory = make_job(tmp_path)
    newest, folder, settings = killed_with_two_checkpoints(directory, "output published")
    CORRUPTIONS[corruption](state_file(folder))

    result = run_to_end(directory, *settings)

    assert re.search(rf"warning: .*checkpoint {newest}\b.*skipped", result.stderr), result.stderr
    assert re.search(rf"warning: withdrew \d+ part files? from out/key_windows that checkpoint {newest}\b",
                     result.stderr), result.stderr
    assert outputs(directory) == reference
    assert_no_leftovers(directory)


def test_a_checkpoint_without_metadata_is_incomplete_and_the_one_before_is_used(tmp_path, reference):
    directory = make_job(tmp_path)
    newest, folder, settings = killed_with_two_checkpoints(directory, "output staged")
    (folder / "_metadata").unlink()
    assert checkpoints(directory).latest().id < newest

    run_to_end(directory, *settings)

    assert outputs(directory) == reference
    assert_no_leftovers(directory)


def test_a_checkpoint_of_a_changed_query_is_refused_naming_the_operator_and_the_change(tmp_path):
    directory = make_job(tmp_path)
    run_killed(directory, *CHECKPOINT_EVERY_BATCH, fault="batch:6")
    assert checkpoints(directory).completed(), "no checkpoint completed before the kill"
    last_window = JOB.rindex("INTERVAL '10' SECOND")
    changed = JOB[:last_window] + "INTERVAL '20' SECOND" + JOB[last_window + len("INTERVAL '10' SECOND"):]
    (directory / f"{JOB_NAME}.sql").write_text(changed)

    result = run(directory, *CHECKPOINT_EVERY_BATCH)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "window_totals.window_aggregate" in result.stderr, result.stderr
    assert "window" in result.stderr.split("window_totals.window_aggregate", 1)[1], result.stderr
    assert "Traceback" not in result.stderr


# -- restarting within a run -------------------------------------------------------------------


def test_an_injected_failure_restarts_the_job_from_its_latest_checkpoint(tmp_path, reference):
    directory = make_job(tmp_path)

    result = run(directory, *CHECKPOINT_EVERY_BATCH, *RESTART_NOW, fault="batch:5:raise")

    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"restart", result.stderr), result.stderr
    assert "injected fault at batch #5" in result.stderr
    assert outputs(directory) == reference
    assert_no_leftovers(directory)


def test_an_injected_failure_without_a_restart_strategy_fails_the_job_naming_the_fault(tmp_path):
    directory = make_job(tmp_path)

    result = run(directory, *CHECKPOINT_EVERY_BATCH, fault="batch:5:raise")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "injected fault at batch #5" in result.stderr
    assert "Traceback" not in result.stderr, "a failing job reports an error, not a Python traceback"


# -- savepoints -------------------------------------------------------------------------------

NEXMARK_JOB = """\
SET 'weir.source.batch-size' = '200';

CREATE TABLE bids (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, date_time TIMESTAMP(3),
  WATERMARK FOR date_time AS date_time - INTERVAL '2' SECOND
) WITH ('connector' = 'nexmark', 'table' = 'bid', 'first-event.rate' = '10000'{events});

CREATE MATERIALIZED VIEW channel_seconds AS
SELECT channel, window_start, window_end, COUNT(*) AS bids, SUM(price) AS total
FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(date_time), INTERVAL '1' SECOND))
GROUP BY channel, window_start, window_end;
"""
BIDS_READ = re.compile(r"in [\d.]+ s: ([\d,]+) events read")


def wait_for(condition, what: str, process: subprocess.Popen, limit: int = 600) -> None:
    """Wait, up to ``limit`` short pauses, until ``condition()``; fail if the job ends first."""
    for _ in range(limit):
        if condition():
            return
        assert process.poll() is None, f"the job ended while waiting for {what}: {process.communicate()}"
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


def view_rows(directory: Path, view: str = "channel_seconds") -> list[tuple]:
    con = duckdb.connect(str(directory / DATABASE), read_only=True)
    try:
        return sorted(con.sql(f"SELECT * FROM {view}").fetchall())
    finally:
        con.close()


def test_a_job_stopped_with_a_savepoint_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch, capsys):
    directory = tmp_path / "resumed"
    directory.mkdir()
    (directory / "bids.sql").write_text(NEXMARK_JOB.format(events=""))
    job = subprocess.Popen([sys.executable, "-m", "weir.shell.cli", "run", "bids.sql", "--db", DATABASE, "--no-progress"],
                           cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        control = directory / ".weir" / "bids" / "control" / "job.json"
        wait_for(control.exists, "the job's control file", job)
        monkeypatch.chdir(directory)

        assert main(["savepoint", "bids.sql"]) == 0
        said = capsys.readouterr().out
        savepoint = re.search(r"^savepoint \d+ at (\S+)$", said, re.M)
        assert savepoint, said
        assert (Path(savepoint.group(1)) / "_metadata").is_file()

        assert main(["stop", "bids", "--savepoint"]) == 0
        said = capsys.readouterr().out
        stopped = re.search(r"^stopped with savepoint \d+ at (\S+)$", said, re.M)
        assert stopped, said
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert job.returncode == 0, out + err
    assert re.search(r"job bids stopped with savepoint \d+ .* at " + re.escape(stopped.group(1)), out), out

    # Resume with a bounded source, far enough past what the first run read.
    bids_read = int(BIDS_READ.search(out).group(1).replace(",", ""))
    events = 2 * bids_read + 20_000
    bounded = NEXMARK_JOB.format(events=f", 'events' = '{events}'")
    (directory / "bids.sql").write_text(bounded)
    assert main(["run", "bids.sql", "--db", DATABASE, "--no-progress", "--from-savepoint", stopped.group(1)]) == 0
    resumed_out = capsys.readouterr().out
    assert BIDS_READ.search(resumed_out), resumed_out

    uninterrupted = tmp_path / "uninterrupted"
    uninterrupted.mkdir()
    (uninterrupted / "bids.sql").write_text(bounded)
    monkeypatch.chdir(uninterrupted)
    assert main(["run", "bids.sql", "--db", DATABASE, "--no-progress"]) == 0
    whole_out = capsys.readouterr().out
    resumed_rows = int(BIDS_READ.search(resumed_out).group(1).replace(",", ""))
    whole_rows = int(BIDS_READ.search(whole_out).group(1).replace(",", ""))
    assert resumed_rows < whole_rows, "the resumed run started over instead of from the savepoint"

    expected = view_rows(uninterrupted)
    assert expected, "the uninterrupted run fired no window"
    assert view_rows(directory) == expected


# -- a finished job ------------------------------------------------------------------------------


def test_a_second_run_of_a_finished_job_writes_nothing(tmp_path, reference):
    directory = make_job(tmp_path)
    run_to_end(directory, *CHECKPOINT_EVERY_BATCH)
    assert outputs(directory) == reference

    again = run_to_end(directory, *CHECKPOINT_EVERY_BATCH)

    assert "had already finished" in again.stdout and "events read" not in again.stdout, again.stdout
    assert outputs(directory) == reference  # every sink as the first run left it: one copy

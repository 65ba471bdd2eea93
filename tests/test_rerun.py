"""Exactly once at the edges of a run: a finished job run again, a kill after the final
commit, checkpoint files lost or corrupt, and a resume from a retained checkpoint.

The job of test_recovery.py, with a json sink beside the csv and parquet ones and the
materialized view (and, where a test says so, an append-only DuckDB table). Every run
that exits 0 must leave, row for row, what one uninterrupted run leaves; a run that
cannot must exit 1 with an error naming the sink and --fresh, and change nothing.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from test_recovery import (
    CHECKPOINT_EVERY_BATCH,
    DATABASE,
    EVENTS,
    JOB_NAME,
    run,
    run_killed,
    run_to_end,
)

FILE_SINKS = {"key_windows": "csv", "key_windows_json": "json", "key_windows_pq": "parquet"}
VIEW = "window_totals"
TABLE = "key_windows_db"
WINDOWS = """
SELECT k, window_start, window_end, COUNT(*), SUM(v)
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY k, window_start, window_end;
"""
COLUMNS = "(k VARCHAR, window_start TIMESTAMP(3), window_end TIMESTAMP(3), cnt BIGINT, total BIGINT)"


def job_sql(with_table: bool) -> str:
    parts = ["SET 'weir.source.batch-size' = '2';",
             "CREATE TABLE events (ts TIMESTAMP(3), k VARCHAR, v BIGINT, "
             "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
             "WITH ('connector' = 'filesystem', 'path' = 'data/events.csv', 'format' = 'csv');"]
    for name, fmt in FILE_SINKS.items():
        parts.append(f"CREATE TABLE {name} {COLUMNS} "
                     f"WITH ('connector' = 'filesystem', 'path' = 'out/{name}', 'format' = '{fmt}');")
        parts.append(f"INSERT INTO {name} {WINDOWS}")
    if with_table:
        parts.append(f"CREATE TABLE {TABLE} {COLUMNS} "
                     f"WITH ('connector' = 'duckdb', 'path' = '{DATABASE}', 'table-name' = '{TABLE}');")
        parts.append(f"INSERT INTO {TABLE} {WINDOWS}")
    parts.append(f"CREATE MATERIALIZED VIEW {VIEW} AS SELECT window_start, window_end, COUNT(*) AS cnt, "
                 "SUM(v) AS total FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                 "GROUP BY window_start, window_end;")
    return "\n".join(parts) + "\n"


def make_job(directory: Path, with_table: bool = False) -> Path:
    (directory / "data").mkdir(parents=True)
    (directory / "data" / "events.csv").write_text(EVENTS)
    (directory / f"{JOB_NAME}.sql").write_text(job_sql(with_table))
    return directory


def part_files(directory: Path, sink: str) -> list[Path]:
    folder = directory / "out" / sink
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith((".", "_"))) \
        if folder.is_dir() else []


def outputs(directory: Path) -> dict[str, list[tuple]]:
    """What a reader sees in every sink, as sorted lists (so that a duplicate shows)."""
    con = duckdb.connect()
    seen = {}
    for sink, fmt in FILE_SINKS.items():
        files = [str(p) for p in part_files(directory, sink)]
        reader = {"csv": "read_csv", "json": "read_json", "parquet": "read_parquet"}[fmt]
        seen[sink] = sorted(tuple(str(v) for v in row) for row in
                            con.sql(f"SELECT * FROM {reader}($files)", params={"files": files}).fetchall()) \
            if files else []
    seen[VIEW], seen[TABLE] = [], []
    if (directory / DATABASE).exists():
        con.execute(f"ATTACH '{directory / DATABASE}' AS job (READ_ONLY)")
        tables = {r[0] for r in con.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'job'").fetchall()}
        for name in (VIEW, TABLE):
            if name in tables:
                seen[name] = sorted(con.sql(f"SELECT * FROM job.{name}").fetchall())
    con.close()
    return seen


def assert_no_leftovers(directory: Path) -> None:
    hidden = [p for sink in FILE_SINKS for p in (directory / "out" / sink).iterdir()
              if p.name.startswith(".")]
    staging = directory / f"{DATABASE}.staging"
    hidden += list(staging.iterdir()) if staging.is_dir() else []
    assert hidden == []


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, list[tuple]]:
    """One uninterrupted run of the job with the DuckDB table (the job without it has the same rows)."""
    directory = make_job(tmp_path_factory.mktemp("uninterrupted"), with_table=True)
    run_to_end(directory)
    seen = outputs(directory)
    assert all(seen.values()) and all(len(set(rows)) == len(rows) for rows in seen.values()), seen
    assert len(seen["key_windows"]) == 15 and len(seen[VIEW]) == 5, seen
    return seen


def expected(reference: dict, with_table: bool) -> dict:
    return reference if with_table else {**reference, TABLE: []}


def state(directory: Path) -> Path:
    return directory / ".weir" / JOB_NAME


# -- a finished job, run again ---------------------------------------------------------------


@pytest.mark.parametrize("parallelism", [1, 2])
def test_killed_right_after_the_final_commit_the_same_command_changes_nothing(parallelism, tmp_path, reference):
    directory = make_job(tmp_path, with_table=True)
    settings = ["--parallelism", str(parallelism)]
    run_killed(directory, *settings, fault="output-committed:1")
    assert outputs(directory) == reference

    again = run_to_end(directory, *settings)

    assert "had already finished" in again.stdout and "--fresh" in again.stdout, again.stdout
    assert outputs(directory) == reference
    assert_no_leftovers(directory)


def test_a_finished_job_run_again_writes_nothing_and_fresh_starts_it_over(tmp_path, reference):
    directory = make_job(tmp_path, with_table=True)
    run_to_end(directory, *CHECKPOINT_EVERY_BATCH)
    files = {sink: [(p.name, p.stat().st_mtime_ns) for p in part_files(directory, sink)] for sink in FILE_SINKS}
    final = max(int(p.name[4:]) for p in (state(directory) / "checkpoints").iterdir())

    again = run_to_end(directory, *CHECKPOINT_EVERY_BATCH)

    said = again.stdout
    assert f"job {JOB_NAME} had already finished: its final checkpoint {final} " in said, said
    assert "out/key_windows_json" in said and f"table {TABLE} in {DATABASE}" in said, said
    assert "events read" not in said, "a finished job ran again"
    assert outputs(directory) == reference
    assert {sink: [(p.name, p.stat().st_mtime_ns) for p in part_files(directory, sink)]
            for sink in FILE_SINKS} == files, "a run of a finished job touched its part files"

    fresh = run_to_end(directory, "--fresh", *CHECKPOINT_EVERY_BATCH)

    assert "24 events read" in fresh.stdout, fresh.stdout
    assert outputs(directory) == reference, "--fresh left the first run's output beside the second's"
    assert_no_leftovers(directory)


def test_a_finished_job_whose_sql_changed_is_refused_naming_fresh(tmp_path, reference):
    directory = make_job(tmp_path, with_table=True)
    run_to_end(directory)
    sql = directory / f"{JOB_NAME}.sql"
    sql.write_text(sql.read_text().replace("SUM(v) AS total", "SUM(v) + 0 AS total"))

    refused = run(directory)

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "SQL has changed" in refused.stderr and "--fresh" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert outputs(directory) == reference

    run_to_end(directory, "--fresh")
    assert outputs(directory) == reference


# -- checkpoint files lost ------------------------------------------------------------------------


def newest_checkpoint(directory: Path) -> Path:
    return max((state(directory) / "checkpoints").glob("chk-*"), key=lambda p: int(p.name[4:]))


LOSSES = {
    "the newest _metadata": lambda d: (newest_checkpoint(d) / "_metadata").unlink(),
    "the newest checkpoint directory": lambda d: shutil.rmtree(newest_checkpoint(d)),
    "every _metadata": lambda d: [p.unlink() for p in (state(d) / "checkpoints").glob("chk-*/_metadata")],
    "checkpoints/": lambda d: shutil.rmtree(state(d) / "checkpoints"),
}
#: Batches of 6 rows: checkpoint 1 fires no window, checkpoint 2 does. Killed once all sinks
#: (four without the DuckDB table, five with) committed checkpoint 2, before checkpoint 3.
PUBLISHED = [*CHECKPOINT_EVERY_BATCH, "--set", "weir.source.batch-size=6"]


@pytest.mark.parametrize("loss", list(LOSSES))
def test_output_of_lost_checkpoints_is_withdrawn_and_published_once(loss, tmp_path, reference):
    directory = make_job(tmp_path)
    run_killed(directory, *PUBLISHED, fault="commit:8")
    assert outputs(directory)["key_windows"], "checkpoint 2's output was not published before the kill"
    LOSSES[loss](directory)

    result = run_to_end(directory, *PUBLISHED)

    assert "withdrew" in result.stderr, result.stderr
    assert outputs(directory) == expected(reference, False)
    assert_no_leftovers(directory)


@pytest.mark.parametrize("loss", ["the newest checkpoint directory", "checkpoints/"])
def test_a_finished_job_whose_checkpoints_were_lost_recomputes_the_same_output(loss, tmp_path, reference):
    directory = make_job(tmp_path)
    run_to_end(directory, *CHECKPOINT_EVERY_BATCH)
    LOSSES[loss](directory)

    run_to_end(directory, *CHECKPOINT_EVERY_BATCH)

    assert outputs(directory) == expected(reference, False)
    assert_no_leftovers(directory)


@pytest.mark.parametrize("loss", ["the newest checkpoint directory", "checkpoints/"])
def test_rows_an_append_only_table_got_from_lost_checkpoints_are_taken_back(loss, tmp_path, reference):
    directory = make_job(tmp_path, with_table=True)
    run_killed(directory, *PUBLISHED, fault="commit:10")
    assert outputs(directory)[TABLE], "checkpoint 2's rows were not in the table before the kill"
    LOSSES[loss](directory)

    result = run_to_end(directory, *PUBLISHED)

    assert f"rows from table '{TABLE}'" in result.stderr, result.stderr
    assert outputs(directory) == reference
    assert_no_leftovers(directory)


def test_rows_an_append_only_table_can_no_longer_take_back_are_refused_until_fresh(tmp_path, reference):
    """Once the staged files of a commit are gone (a table keeps its latest 8 checkpoints'), its
    rows cannot be told from others: the run is refused, and --fresh starts over."""
    directory = make_job(tmp_path, with_table=True)
    run_killed(directory, *PUBLISHED, fault="commit:10")
    LOSSES["checkpoints/"](directory)
    shutil.rmtree(directory / f"{DATABASE}.weir-log")
    before = outputs(directory)

    refused = run(directory, *PUBLISHED)

    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"table '{TABLE}' in {DATABASE}" in refused.stderr and "checkpoint 2" in refused.stderr, refused.stderr
    assert "--fresh" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    assert outputs(directory)[TABLE] == before[TABLE]

    run_to_end(directory, "--fresh", *PUBLISHED)

    assert outputs(directory) == reference
    assert_no_leftovers(directory)


# -- a corrupt _metadata --------------------------------------------------------------------------


def corrupt_metadata(directory: Path) -> int:
    newest = newest_checkpoint(directory)
    metadata = newest / "_metadata"
    data = bytearray(metadata.read_bytes())
    data[len(data) // 2] ^= 0xFF
    metadata.write_bytes(bytes(data))
    return int(newest.name[4:])


def test_a_corrupt_newest_metadata_is_skipped_and_ids_continue_after_it(tmp_path, reference):
    directory = make_job(tmp_path)
    run_killed(directory, *PUBLISHED, fault="commit:8")
    corrupt = corrupt_metadata(directory)

    first = run_to_end(directory, *PUBLISHED)

    assert f"checkpoint {corrupt}" in first.stderr and "skipped" in first.stderr, first.stderr
    assert outputs(directory) == expected(reference, False)
    ids = sorted(int(p.name[4:]) for p in (state(directory) / "checkpoints").glob("chk-*"))
    assert max(ids) > corrupt, f"new checkpoints did not continue after {corrupt}: {ids}"
    again = run_to_end(directory, *PUBLISHED)
    assert "had already finished" in again.stdout, again.stdout
    assert outputs(directory) == expected(reference, False)


def test_a_corrupt_newest_metadata_over_an_append_only_table_takes_its_rows_back(tmp_path, reference):
    directory = make_job(tmp_path, with_table=True)
    run_killed(directory, *PUBLISHED, fault="commit:10")
    corrupt_metadata(directory)

    run_to_end(directory, *PUBLISHED)

    assert outputs(directory) == reference
    assert_no_leftovers(directory)


# -- resuming from a retained checkpoint ------------------------------------------------------------


def test_from_savepoint_resumes_from_a_retained_checkpoint_and_keeps_it(tmp_path, reference):
    directory = make_job(tmp_path)
    run_killed(directory, *CHECKPOINT_EVERY_BATCH, fault="batch:9")
    retained = sorted((state(directory) / "checkpoints").glob("chk-*"), key=lambda p: int(p.name[4:]))
    assert len(retained) >= 2, retained
    oldest = retained[0]
    relative = oldest.relative_to(directory)

    result = run_to_end(directory, "--from-savepoint", str(relative))

    assert "24 events read" not in result.stdout, "the job started over instead of resuming"
    assert (oldest / "_metadata").is_file(), "the checkpoint resumed from was deleted"
    assert outputs(directory) == expected(reference, False)
    assert_no_leftovers(directory)


# -- parallelism ------------------------------------------------------------------------------------


def test_at_parallelism_2_the_view_keeps_its_rows_until_the_first_commit(tmp_path, reference):
    directory = make_job(tmp_path, with_table=True)
    run_to_end(directory, "--parallelism", "2")
    assert outputs(directory) == reference

    failed = run(directory, "--fresh", "--parallelism", "2", fault="batch:2")

    assert failed.returncode != 0, failed.stdout + failed.stderr
    assert outputs(directory)[VIEW] == reference[VIEW], "the view was emptied before the first commit"
    run_to_end(directory, "--parallelism", "2")
    assert outputs(directory) == reference

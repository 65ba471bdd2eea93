"""One rule divides a source's splits among subtasks: ``Source.owner(split, N)``, for the
splits listed at the start and those discovered later alike. A checkpoint records offsets per
split and no assignment, so a savepoint taken at one parallelism restores exactly at another
(each split's offset goes to whichever subtask owns it now)."""
from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from weir.engine.connectors.base import Source
from weir.engine.connectors.filesystem import FileSystemSource
from weir.engine.runtime.job import JobOptions, run_job
from weir.engine.runtime.source_reader import SourceReader
from weir.planner.planner import plan_script
from weir.sql import parse

from jobs import KEY_WINDOWS_JOB, KEY_WINDOWS_ORACLE, stop_after_first_checkpoint


class Numbered(Source):
    """Splits '0'.. listed in a given order; re-listing adds the ``later`` ones."""

    discovery_interval = 1e-6

    def __init__(self, listed: list[str], later: list[str] = ()):
        super().__init__({}, pa.schema([("v", pa.int64())]))
        self.listed, self.later, self.listings = listed, list(later), 0

    def splits(self) -> list[str]:
        self.listings += 1
        return self.listed if self.listings == 1 else self.listed + self.later

    @property
    def bounded(self) -> bool:
        return False

    def read(self, split, offset=None):
        while True:
            yield pa.RecordBatch.from_pydict({"v": []}, schema=self.schema), offset


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_listed_and_discovered_splits_go_by_the_same_owner_whatever_the_listing_order(parallelism):
    for listed in (["0", "1", "2", "3"], ["3", "1", "0", "2"]):  # a position rule would differ here
        readers = [SourceReader(Numbered(listed, later=["4", "5"]), None, subtask=i, parallelism=parallelism)
                   for i in range(parallelism)]
        for reader in readers:
            steps = iter(reader)
            while reader.source.listings < 2:  # a step re-lists once the interval has passed
                next(steps)
        for i, reader in enumerate(readers):
            assert sorted(reader.splits) == [str(n) for n in range(6) if n % parallelism == i]


def test_a_parquet_files_row_groups_go_round_robin_and_a_file_to_one_owner():
    source = FileSystemSource({"connector": "filesystem", "path": ".", "format": "parquet"}, pa.schema([]))
    for parallelism in (2, 3):
        owners = [source.owner(f"data/big.parquet#rg{k}", parallelism) for k in range(6)]
        assert sorted(owners) == sorted(list(range(parallelism)) * (6 // parallelism))  # each subtask a share
        assert owners[0] == source.owner("data/big.parquet", parallelism)  # the file's own subtask first
    assert source.owner("data/a.csv", 4) == source.owner("data/a.csv", 4) in range(4)


@pytest.mark.parametrize("names", [[f"data/part-{n}.csv" for n in range(6)],
                                   [f"in/2024-03-{d:02d}.csv" for d in range(10, 16)],
                                   [f"out/part-{n:05d}.parquet" for n in range(6)]])
def test_numbered_files_are_shared_evenly(names):
    """Numbered files go round-robin by their last number, so every subtask gets a share (a
    hash of the whole name put part-0.csv ... part-4.csv all on one of two)."""
    source = FileSystemSource({"connector": "filesystem", "path": ".", "format": "csv"}, pa.schema([]))
    for parallelism in (2, 3):
        owners = [source.owner(name, parallelism) for name in names]
        assert sorted(owners) == sorted(list(range(parallelism)) * (6 // parallelism))


#: Five files, one per 400 s of events: numbered, 3 go to one of two workers, 2 to the other,
#: so neither finishes before the stop's savepoint.
FILES = [f"data/events-{f}.csv" for f in range(5)]


def write_files(directory: Path) -> None:
    (directory / "data").mkdir()
    for f, name in enumerate(FILES):
        seconds = [400 * f + i for i in range(400)]
        pacsv.write_csv(pa.table({"ts": pa.array(seconds, pa.timestamp("s")),
                                  "k": ["abcd"[(s * 7) % 4] for s in seconds], "v": seconds}), directory / name)


def run(tmp: Path, parallelism: int, *, savepoint: Path | None = None, stop: bool = False):
    sql = KEY_WINDOWS_JOB.format(data="data", out="out")  # relative (the test runs in tmp): fixed split ids
    settings = {"parallelism.default": str(parallelism), "weir.source.batch-size": "4"}
    if stop:  # a first checkpoint after 3 batches, then the stop's savepoint: part-way through 500
        settings["weir.checkpointing.interval-batches"] = "3"
    script = plan_script(parse(sql), db_path=str(tmp / "v.duckdb"), settings=settings)

    options = JobOptions(state_dir=tmp / "state", from_savepoint=savepoint,
                         on_checkpoint=stop_after_first_checkpoint(tmp / "state") if stop else None)
    return run_job(script.graph, options)


@pytest.mark.parametrize("after", [1, 3])
def test_a_filesystem_savepoint_at_parallelism_2_restores_exactly_at_another(tmp_path, monkeypatch, after):
    monkeypatch.chdir(tmp_path)
    write_files(tmp_path)
    source = FileSystemSource({"connector": "filesystem", "path": "data", "format": "csv"}, pa.schema([]))
    assert source.splits() == FILES and sorted(source.owner(name, 2) for name in FILES) == [0, 0, 1, 1, 1]
    first = run(tmp_path, 2, stop=True)
    assert first.stopped_with is not None and first.stopped_with.kind == "savepoint"
    run(tmp_path, after, savepoint=first.stopped_with.path)
    oracle = KEY_WINDOWS_ORACLE.format(files=tmp_path / "data" / "*.csv")
    written = duckdb.sql(f"SELECT k, window_start, cnt, total FROM read_csv('{tmp_path / 'out'}/*.csv') ORDER BY ALL")
    assert written.fetchall() == duckdb.sql(oracle).fetchall()

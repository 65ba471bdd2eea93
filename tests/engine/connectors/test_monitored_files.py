"""A filesystem source with 'source.monitor-interval': files that keep arriving, each read once."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from weir.engine.connectors.options import parse_timestamp_us
from weir.engine.connectors.registry import create_source
from weir.engine.errors import ConnectorOptionError
from weir.engine.runtime.source_reader import SourceReader

SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int64())])
DEADLINE_SECONDS = 60


def watched(directory: Path, batch_size: int = 2):
    options = {"connector": "filesystem", "path": str(directory), "format": "csv",
               "source.monitor-interval": "20ms"}
    return create_source(options, SCHEMA, batch_size=batch_size)


def arrive(directory: Path, name: str, rows: list[tuple[str, int]]) -> None:
    """Write a csv file the way a writer should: under a dot-name, then renamed into place."""
    temporary = directory / f".{name}.tmp"
    temporary.write_text("k,v\n" + "".join(f"{k},{v}\n" for k, v in rows))
    os.replace(temporary, directory / name)


def take(stream, until) -> tuple[list[tuple[str, int]], dict]:
    """Rows from ``stream`` until ``until(rows, offset)`` holds (a deadline guards a hang); the offset after."""
    rows, offset, deadline = [], None, time.monotonic() + DEADLINE_SECONDS
    while not until(rows, offset):
        assert time.monotonic() < deadline, f"the source gave only {rows}"
        batch, offset = next(stream)
        rows += [(r["k"], r["v"]) for r in batch.to_pylist()]
    return rows, offset


def test_files_that_arrive_are_read_once_each_and_dot_files_never(tmp_path):
    source = watched(tmp_path)
    assert not source.bounded and source.splits() == [str(tmp_path)]
    stream = source.read(str(tmp_path))
    arrive(tmp_path, "a.csv", [("a", 1), ("a", 2), ("a", 3)])
    rows, _ = take(stream, lambda rows, _: len(rows) >= 3)
    assert rows == [("a", 1), ("a", 2), ("a", 3)]
    (tmp_path / ".b.csv.tmp").write_text("k,v\nb,1\n")  # still being written
    (tmp_path / "_c.csv").write_text("k,v\nc,1\n")
    arrive(tmp_path, "d.csv", [("d", 1)])  # listed with the two above, which are skipped
    rows, offset = take(stream, lambda rows, _: len(rows) >= 1)
    assert rows == [("d", 1)]
    os.replace(tmp_path / ".b.csv.tmp", tmp_path / "b.csv")  # complete: now it is read
    rows, offset = take(stream, lambda rows, _: len(rows) >= 1)
    assert rows == [("b", 1)]
    _, offset = take(stream, lambda _, at: at is not None and at["file"] is None)  # (b.csv done)
    assert sorted(offset["done"]) == [str(tmp_path / f) for f in ("a.csv", "b.csv", "d.csv")]


def test_a_restored_source_skips_read_files_and_resumes_inside_the_one_being_read(tmp_path):
    arrive(tmp_path, "a.csv", [("a", n) for n in range(5)])
    stream = watched(tmp_path).read(str(tmp_path))
    rows, offset = take(stream, lambda rows, _: len(rows) >= 2)  # batches of 2: inside a.csv
    assert offset == {"done": (), "file": str(tmp_path / "a.csv"), "rows": 2}
    arrive(tmp_path, "b.csv", [("b", 0)])  # arrives while the job is down
    resumed = watched(tmp_path, batch_size=3).read(str(tmp_path), offset)
    rest, after = take(resumed, lambda rows, _: len(rows) >= 4)
    assert rows + rest == [("a", n) for n in range(5)] + [("b", 0)]
    arrive(tmp_path, "c.csv", [("c", 0)])
    again = watched(tmp_path).read(str(tmp_path), {**after, "done": list(after["done"])})  # as JSON gives it
    assert take(again, lambda rows, _: len(rows) >= 1)[0] == [("c", 0)]


def test_a_monitor_interval_of_zero_is_refused(tmp_path):
    with pytest.raises(ConnectorOptionError, match="'source.monitor-interval' must be longer than 0"):
        create_source({"connector": "filesystem", "path": str(tmp_path), "format": "csv",
                       "source.monitor-interval": "0s"}, SCHEMA)


def test_resuming_at_any_offset_gives_exactly_the_rows_after_it(tmp_path):
    files = {"a.csv": 5, "b.csv": 1, "c.csv": 4}
    for name, count in files.items():
        arrive(tmp_path, name, [(name[0], n) for n in range(count)])
    total = sum(files.values())
    stream = watched(tmp_path).read(str(tmp_path))
    steps = []  # (rows so far, offset after them) at every step of a full read
    rows: list = []
    while len(rows) < total:
        batch, offset = next(stream)
        rows += [(r["k"], r["v"]) for r in batch.to_pylist()]
        steps.append((len(rows), offset))
    for emitted, offset in steps:
        resumed = watched(tmp_path, batch_size=3).read(str(tmp_path), offset)
        rest, _ = take(resumed, lambda got, _: emitted + len(got) >= total)
        assert rows[:emitted] + rest == rows


def test_the_watermark_advances_as_files_arrive(tmp_path):
    schema = pa.schema([("k", pa.string()), ("ts", pa.timestamp("us"))])
    source = create_source({"connector": "filesystem", "path": str(tmp_path), "format": "csv",
                            "source.monitor-interval": "20ms"}, schema)
    reader = iter(SourceReader(source, "ts", bounded=("ts", 1_000_000)))  # ts - 1 s

    def watermark_after(name: str, ts: str) -> int:
        (tmp_path / f".{name}").write_text(f"k,ts\n{name},{ts}\n")
        os.replace(tmp_path / f".{name}", tmp_path / name)
        deadline = time.monotonic() + DEADLINE_SECONDS
        while True:
            assert time.monotonic() < deadline, f"no watermark after {name}"
            _, watermark = next(reader)
            if watermark is not None:
                return watermark.timestamp

    first = watermark_after("a.csv", "2024-01-01 00:00:10")
    assert first == parse_timestamp_us("ts", "2024-01-01 00:00:09")
    assert watermark_after("b.csv", "2024-01-01 00:00:30") == first + 20_000_000

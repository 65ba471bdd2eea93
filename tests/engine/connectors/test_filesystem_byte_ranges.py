"""With 'source.split-size' a big csv or JSON lines file is read as byte ranges: every line once,
in order, whatever the range size; offsets resume inside a range; errors name the file's line."""
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from weir.engine.connectors.registry import create_source
from weir.engine.errors import ConnectorOptionError, SourceError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def source(path, fmt, **options):
    return create_source({"connector": "filesystem", "path": str(path), "format": fmt, **options},
                         SCHEMA, batch_size=7)


def write(path, fmt, names):
    if fmt == "csv":
        path.write_text("id,name\n" + "".join(f'{i},"{n}"\n' for i, n in enumerate(names)))
    else:
        path.write_text("".join(json.dumps({"id": i, "name": n}) + "\n" for i, n in enumerate(names)))


def ids(src, split, offset=None):
    return [i for b, _ in src.read(split, offset) for i in b.column("id").to_pylist()]


@settings(max_examples=40, deadline=None)
@given(fmt=st.sampled_from(["csv", "json"]),
       names=st.lists(st.text(alphabet="ab ,é", max_size=30), min_size=0, max_size=60),
       split_size=st.integers(1, 400))
def test_the_ranges_hold_every_line_once_in_order(tmp_path_factory, fmt, names, split_size):
    path = tmp_path_factory.mktemp("r") / f"t.{fmt}"
    write(path, fmt, names)
    src = source(path, fmt, **{"source.split-size": str(split_size)})
    splits = src.splits()
    size = path.stat().st_size
    assert len(splits) == max(1, -(-size // split_size))
    assert {src.chain(s) for s in splits} == {str(path)}
    read = [i for s in splits for i in ids(src, s)]
    assert read == list(range(len(names)))
    assert [n for s in splits for b, _ in src.read(s) for n in b.column("name").to_pylist()] == names


def test_a_file_below_the_split_size_or_without_one_is_one_split(tmp_path):
    write(tmp_path / "t.csv", "csv", ["x"] * 10)
    assert source(tmp_path / "t.csv", "csv", **{"source.split-size": "1kb"}).splits() == [str(tmp_path / "t.csv")]
    assert source(tmp_path / "t.csv", "csv").splits() == [str(tmp_path / "t.csv")]  # unset: never split


def test_an_offset_resumes_inside_a_range(tmp_path):
    write(tmp_path / "t.csv", "csv", [f"n{i}" for i in range(300)])
    src = source(tmp_path / "t.csv", "csv", **{"source.split-size": "1kb"})
    splits = src.splits()
    assert len(splits) > 2
    whole = ids(src, splits[1])
    steps = list(src.read(splits[1]))
    for batch, offset in steps[:-1]:
        assert ids(src, splits[1], offset) == whole[offset:]
    assert steps[-1][1] == len(whole)  # an offset counts the rows of the range


def test_the_ranges_of_a_file_go_round_robin(tmp_path):
    write(tmp_path / "t.csv", "csv", [f"n{i}" for i in range(300)])
    src = source(tmp_path / "t.csv", "csv", **{"source.split-size": "500"})
    owners = [src.owner(s, 2) for s in src.splits()]
    assert owners == [(owners[0] + k) % 2 for k in range(len(owners))]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_a_malformed_row_in_a_later_range_names_its_line_in_the_file(tmp_path, fmt):
    path = tmp_path / f"t.{fmt}"
    write(path, fmt, [f"n{i}" for i in range(200)])
    lines = path.read_text().splitlines(keepends=True)
    bad = 150  # line 151 of the file
    lines[bad] = "oops,1\n" if fmt == "csv" else "{oops\n"
    path.write_text("".join(lines))
    src = source(path, fmt, **{"source.split-size": "700"})
    splits = src.splits()
    with pytest.raises(SourceError) as error:
        for s in splits:
            ids(src, s)
    assert f"'{path}' at line 151:" in error.value.message


def test_a_split_size_of_zero_is_refused(tmp_path):
    write(tmp_path / "t.csv", "csv", ["x"])
    with pytest.raises(ConnectorOptionError) as error:
        source(tmp_path / "t.csv", "csv", **{"source.split-size": "0"})
    assert "source.split-size" in error.value.message

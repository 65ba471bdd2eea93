"""The filesystem connector: round trips, splits and offsets, malformed rows, commit protocol."""
import os
from datetime import datetime

import duckdb
import pyarrow as pa
import pytest

from weir.engine.connectors.registry import create_sink, create_source
from weir.engine.errors import ConnectorOptionError, SourceError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us")), ("x", pa.float64())])
READ = {"csv": "read_csv", "json": "read_json", "parquet": "read_parquet"}


def sample(first=0, n=5):
    return pa.record_batch([
        pa.array([first + i for i in range(n)], pa.int64()),
        pa.array([f'name, "{i}"' if i % 2 else None for i in range(n)], pa.string()),
        pa.array([1_704_067_200_000_000 + i * 1_500_000 for i in range(n)], pa.timestamp("us")),
        pa.array([i / 2 if i % 3 else None for i in range(n)], pa.float64()),
    ], schema=SCHEMA)


def source(path, fmt, schema=SCHEMA, batch_size=65536, **options):
    return create_source({"connector": "filesystem", "path": str(path), "format": fmt, **options},
                         schema, batch_size=batch_size)


def sink(path, fmt, **options):
    s = create_sink({"connector": "filesystem", "path": str(path), "format": fmt, **options}, SCHEMA)
    s.open()
    return s


def read_all(src):
    batches = [b for split in src.splits() for b, _ in src.read(split)]
    for b in batches:
        assert b.schema == src.schema
    return pa.Table.from_batches(batches, schema=src.schema)


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_round_trip_through_sink_duckdb_and_source(tmp_path, fmt):
    out = tmp_path / "out"
    s = sink(out, fmt)
    s.write(sample(0))
    s.commit(1, s.pre_commit(1))
    s.write(sample(100))
    s.finish()
    # The commit log (_weir_log) is hidden from readers by its '_', as Hive and Spark hide theirs.
    assert sorted(n for n in os.listdir(out) if not n.startswith("_")) == [f"part-0-0.{fmt}", f"part-0-1.{fmt}"]
    assert os.listdir(out / "_weir_log") == ["job.0.jsonl"]
    expected = pa.Table.from_batches([sample(0), sample(100)])

    assert read_all(source(out, fmt)).equals(expected)
    rows = duckdb.sql(f"SELECT id, name, ts::TIMESTAMP, x FROM {READ[fmt]}('{out}/*.{fmt}') ORDER BY id").fetchall()
    assert rows == [tuple(r.values()) for r in expected.to_pylist()]


def test_csv_timestamps_are_written_as_sql_text(tmp_path):
    s = sink(tmp_path, "csv")
    s.write(sample(0, 2))
    s.finish()
    text = (tmp_path / "part-0-0.csv").read_text()
    assert '"2024-01-01 00:00:00"' in text and '"2024-01-01 00:00:01.500"' in text


def test_directory_of_several_files_in_order(tmp_path):
    for i, name in enumerate(["b.csv", "a.csv", "c.csv"]):
        (tmp_path / name).write_text(f"id,name,ts,x\n{i},n{i},2024-01-01 00:00:0{i},{i}.5\n")
    (tmp_path / ".hidden.csv").write_text("id\nnot read\n")
    (tmp_path / "_SUCCESS").write_text("")
    src = source(tmp_path, "csv")
    assert [os.path.basename(s) for s in src.splits()] == ["a.csv", "b.csv", "c.csv"]
    assert read_all(src).column("id").to_pylist() == [1, 0, 2]


def test_declared_subset_and_order_of_columns(tmp_path):
    (tmp_path / "t.csv").write_text("a,b,c\n1,2024-01-01 00:00:01.500,x\n")
    schema = pa.schema([("c", pa.string()), ("b", pa.timestamp("us"))])
    assert read_all(source(tmp_path / "t.csv", "csv", schema)).to_pylist() == [
        {"c": "x", "b": datetime(2024, 1, 1, 0, 0, 1, 500000)}]


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_offsets_resume_exactly(tmp_path, fmt):
    s = sink(tmp_path, fmt)
    s.write(sample(0, 1000))
    s.finish()
    src = source(tmp_path, fmt, batch_size=64)
    [split] = src.splits()
    full = list(src.read(split))
    assert [off for _, off in full][-1] == 1000
    everything = pa.Table.from_batches([b for b, _ in full])
    for batch, offset in full[:-1:5] + [full[3]]:
        tail = pa.Table.from_batches([b for b, _ in src.read(split, offset)], schema=SCHEMA)
        assert tail.equals(everything.slice(offset))
    assert list(src.read(split, 1000)) == []


def test_each_parquet_row_group_is_a_split_of_one_chain(tmp_path):
    """A parquet file with several row groups offers one split per row group (read in
    parallel by the workers of a parallel job); offsets resume within a row group."""
    import pyarrow.parquet as pq
    pq.write_table(pa.Table.from_batches([sample(0, 1000)]), tmp_path / "t.parquet", row_group_size=100)
    src = source(tmp_path / "t.parquet", "parquet", batch_size=64)
    splits = src.splits()
    assert splits == [f"{tmp_path / 't.parquet'}#rg{k}" for k in range(10)]
    assert {src.chain(s) for s in splits} == {str(tmp_path / "t.parquet")}
    whole = [b for s in splits for b, _ in src.read(s)]
    assert pa.Table.from_batches(whole).column("id").to_pylist() == list(range(1000))
    resumed = list(src.read(splits[4], 50))
    assert pa.Table.from_batches([b for b, _ in resumed]).column("id").to_pylist() == list(range(450, 500))
    assert resumed[-1][1] == 100  # the offset is rows emitted within the row group


def test_missing_column_names_file_and_columns_found(tmp_path):
    (tmp_path / "t.csv").write_text("id,name\n1,a\n")
    src = source(tmp_path / "t.csv", "csv")
    with pytest.raises(SourceError) as error:
        read_all(src)
    assert "t.csv' has no column 'ts'" in error.value.message
    assert "the columns found are: id, name" in error.value.message


def test_missing_column_in_json_and_parquet(tmp_path):
    (tmp_path / "t.json").write_text('{"id": 1, "name": "a"}\n')
    with pytest.raises(SourceError, match="has no column 'ts'.*found are: id, name"):
        read_all(source(tmp_path / "t.json", "json"))
    s = create_sink({"connector": "filesystem", "path": str(tmp_path / "p"), "format": "parquet"},
                    pa.schema([("id", pa.int64())]))
    s.open()
    s.write(pa.record_batch([pa.array([1])], names=["id"]))
    s.finish()
    with pytest.raises(SourceError, match="has no column 'name'.*found are: id"):
        read_all(source(tmp_path / "p", "parquet"))


def test_missing_path(tmp_path):
    with pytest.raises(SourceError, match="does not exist"):
        source(tmp_path / "nowhere", "csv").splits()


BAD_CSV = (
    "id,name,ts,x\n"                      # line 1
    "1,a,2024-01-01 00:00:01.500,1\n"     # 2
    "2,b\n"                               # 3: too few fields
    "\n"                                  # 4: empty, skipped silently
    "3,c,2024-01-01 00:00:02,3\n"         # 5
    "x,d,2024-01-01,4\n"                  # 6: id is not a number
    "5,e,notatime,5\n"                    # 7: bad timestamp
    "6,f,2024-01-01 00:00:03,6\n"         # 8
)


def test_malformed_csv_row_names_file_line_and_value(tmp_path):
    (tmp_path / "bad.csv").write_text(BAD_CSV)
    with pytest.raises(SourceError) as error:
        read_all(source(tmp_path / "bad.csv", "csv"))
    assert "bad.csv' at line 3" in error.value.message and "'2,b'" in error.value.message
    assert "csv.ignore-parse-errors" in error.value.hint


def test_unconvertible_csv_value_names_line_and_value(tmp_path):
    (tmp_path / "bad.csv").write_text(BAD_CSV.replace("2,b\n", "2,b,2024-01-01,2\n"))
    with pytest.raises(SourceError) as error:
        read_all(source(tmp_path / "bad.csv", "csv"))
    assert "at line 6" in error.value.message and "'x' is not a valid int64" in error.value.message


def test_ignore_parse_errors_skips_and_counts_csv(tmp_path):
    (tmp_path / "bad.csv").write_text(BAD_CSV)
    src = source(tmp_path / "bad.csv", "csv", **{"csv.ignore-parse-errors": "true"})
    assert read_all(src).column("id").to_pylist() == [1, 3, 6]
    assert src.skipped_rows == 3
    resumed = source(tmp_path / "bad.csv", "csv", **{"csv.ignore-parse-errors": "true"})
    rows = [b for b, _ in resumed.read(resumed.splits()[0], 2)]
    assert pa.Table.from_batches(rows).column("id").to_pylist() == [6]
    assert resumed.skipped_rows == 2  # line 3 was counted by the run that emitted rows 1 and 3


BAD_JSON = (
    '{"id": 1, "name": "a", "ts": "2024-01-01 00:00:01", "x": 1}\n'   # line 1
    '{"id": 2, "name": "b"\n'                                          # 2: not JSON
    "\n"                                                               # 3
    '{"id": "x", "name": "c", "ts": "2024-01-01 00:00:02", "x": 3}\n'  # 4: id not a number
    '{"id": 4, "name": "d", "ts": "2024-01-01 00:00:03", "x": 4}\n'    # 5
)


def test_malformed_json_line(tmp_path):
    (tmp_path / "bad.json").write_text(BAD_JSON)
    with pytest.raises(SourceError) as error:
        read_all(source(tmp_path / "bad.json", "json"))
    assert "bad.json' at line 2" in error.value.message and '{"id": 2, "name": "b"' in error.value.message
    assert "json.ignore-parse-errors" in error.value.hint


def test_ignore_parse_errors_skips_and_counts_json(tmp_path):
    (tmp_path / "bad.json").write_text(BAD_JSON)
    src = source(tmp_path / "bad.json", "json", **{"json.ignore-parse-errors": "true"})
    assert read_all(src).column("id").to_pylist() == [1, 4]
    assert src.skipped_rows == 2


def test_many_bad_rows_in_big_blocks_are_located(tmp_path):
    lines = ["id,name,ts,x"] + [f"{i},n,2024-01-01,{'oops' if i % 997 == 0 else i}" for i in range(20000)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    src = source(tmp_path / "t.csv", "csv", batch_size=4096, **{"csv.ignore-parse-errors": "true"})
    ids = read_all(src).column("id").to_pylist()
    assert src.skipped_rows == len([i for i in range(20000) if i % 997 == 0])
    assert ids == [i for i in range(20000) if i % 997]
    with pytest.raises(SourceError, match="at line 2: column 'x': 'oops'"):
        read_all(source(tmp_path / "t.csv", "csv"))


def test_malformed_row_of_a_block_parsed_on_threads_is_numbered(tmp_path):
    # blocks past CSV_THREAD_BLOCK_BYTES are parsed in parallel pieces; a malformed row in one
    # is still named by its line, and the rows keep their order
    from weir.engine.connectors.file_readers import CSV_THREAD_BLOCK_BYTES
    n = CSV_THREAD_BLOCK_BYTES // 10
    lines = ["id,name,ts,x"] + [f"{i},n,2024-01-01,{i}" if i != n - 7 else f"{i},short" for i in range(n)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    src = source(tmp_path / "t.csv", "csv", batch_size=n, **{"csv.ignore-parse-errors": "true"})
    assert read_all(src).column("id").to_pylist() == [i for i in range(n) if i != n - 7]
    assert src.skipped_rows == 1
    with pytest.raises(SourceError, match=f"at line {n - 7 + 2}: .*'{n - 7},short'"):
        read_all(source(tmp_path / "t.csv", "csv", batch_size=n))


def test_field_delimiter(tmp_path):
    (tmp_path / "t.csv").write_text("id;name;ts;x\n1;a;2024-01-01 00:00:00;0.5\n")
    assert read_all(source(tmp_path / "t.csv", "csv", **{"csv.field-delimiter": ";"})).num_rows == 1
    with pytest.raises(ConnectorOptionError, match="single character"):
        source(tmp_path / "t.csv", "csv", **{"csv.field-delimiter": ";;"})


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_in_progress_files_invisible_until_commit(tmp_path, fmt):
    s = sink(tmp_path / "out", fmt)
    s.write(sample(0))
    handle = s.pre_commit(7)
    visible = [f for f in os.listdir(tmp_path / "out") if not f.startswith(".")]
    assert visible == []
    assert duckdb.sql(f"SELECT count(*) FROM glob('{tmp_path}/out/*.{fmt}')").fetchall() == [(0,)]
    s.commit(7, handle)
    s.commit(7, handle)  # again, as a restored job does: nothing changes
    assert sorted(os.listdir(tmp_path / "out")) == ["_weir_log", f"part-0-0.{fmt}"]


def test_abort_removes_what_was_written_since_the_pre_commit(tmp_path):
    s = sink(tmp_path, "csv")
    s.write(sample(0))
    handle = s.pre_commit(1)
    s.write(sample(10))  # still open
    s.abort()
    # The pre-committed part may belong to a completed checkpoint: it stays, hidden.
    assert os.listdir(tmp_path) == [handle[0][0]]
    sink(tmp_path, "csv").recover([])  # no completed checkpoint covers it: recovery deletes it
    assert os.listdir(tmp_path) == []


def test_restarted_sink_never_overwrites_parts(tmp_path):
    first = sink(tmp_path, "parquet")
    first.write(sample(0))
    first.finish()
    second = sink(tmp_path, "parquet")
    second.write(sample(10))
    second.finish()
    assert sorted(os.listdir(tmp_path)) == ["part-0-0.parquet", "part-0-1.parquet"]


def test_rolling_policy_starts_new_part_files(tmp_path):
    s = sink(tmp_path, "csv", **{"sink.rolling-policy.file-size": "1b"})
    s.write(sample(0))
    s.write(sample(10))
    assert len(s.pre_commit(1)) == 2
    s.commit(1)
    assert sorted(os.listdir(tmp_path)) == ["_weir_log", "part-0-0.csv", "part-0-1.csv"]


def test_parts_of_subtasks_are_named_apart(tmp_path):
    for subtask in (0, 1):
        s = create_sink({"connector": "filesystem", "path": str(tmp_path), "format": "json"},
                        SCHEMA, subtask_index=subtask)
        s.open()
        s.write(sample(subtask * 10))
        s.finish()
    assert sorted(os.listdir(tmp_path)) == ["part-0-0.json", "part-1-0.json"]

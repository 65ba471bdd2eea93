"""Bad input that used to get through: bytes that are not UTF-8 in a csv, epoch numbers in
a parquet column declared TIMESTAMP."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from weir.engine.connectors.registry import create_source
from weir.engine.errors import SourceError

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
#: Line 3 holds a latin-1 'é' (0xE9), line 5 a value that is not a number.
LATIN1_CSV = b"id,name\n1,ann\n2,caf\xe9\n3,bob\nx,eve\n4,zoe\n"


def source(path, fmt, schema=SCHEMA, batch_size=65536, **options):
    return create_source({"connector": "filesystem", "path": str(path), "format": fmt, **options},
                         schema, batch_size=batch_size)


def read_all(src):
    batches = [b for split in src.splits() for b, _ in src.read(split)]
    return pa.Table.from_batches(batches, schema=src.schema)


def test_bytes_not_utf8_name_the_file_the_line_and_the_fix(tmp_path):
    (tmp_path / "people.csv").write_bytes(LATIN1_CSV)
    with pytest.raises(SourceError) as error:
        read_all(source(tmp_path / "people.csv", "csv"))
    message = error.value.message
    assert "people.csv' at line 3" in message
    assert "not valid UTF-8: byte 0xE9 at byte 6 of the line" in message and "iconv" in message
    assert "csv.ignore-parse-errors" in error.value.hint


@pytest.mark.parametrize("batch_size", [1, 2, 65536])
def test_ignore_parse_errors_skips_a_row_that_is_not_utf8_and_keeps_the_rest(tmp_path, batch_size):
    (tmp_path / "people.csv").write_bytes(LATIN1_CSV)
    src = source(tmp_path / "people.csv", "csv", batch_size=batch_size, **{"csv.ignore-parse-errors": "true"})
    table = read_all(src)
    assert table.to_pylist() == [{"id": 1, "name": "ann"}, {"id": 3, "name": "bob"}, {"id": 4, "name": "zoe"}]
    assert src.skipped_rows == 2  # the latin-1 row and the row whose id is 'x'


def test_resuming_after_a_row_that_is_not_utf8_counts_it_once(tmp_path):
    (tmp_path / "people.csv").write_bytes(LATIN1_CSV)
    resumed = source(tmp_path / "people.csv", "csv", **{"csv.ignore-parse-errors": "true"})
    rows = [b for b, _ in resumed.read(resumed.splits()[0], 2)]  # ann and bob were emitted before
    assert pa.Table.from_batches(rows).column("id").to_pylist() == [4]
    assert resumed.skipped_rows == 1  # the row 'x'; line 3 was counted by the run that emitted bob


def test_epoch_millis_in_parquet_declared_timestamp_are_refused(tmp_path):
    pq.write_table(pa.table({"id": [1, 2], "ts": pa.array([1_704_067_200_000, 1_704_067_201_000], pa.int64())}),
                   tmp_path / "events.parquet")
    declared = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
    with pytest.raises(SourceError) as error:
        source(tmp_path / "events.parquet", "parquet", declared).splits()
    assert "events.parquet': column 'ts' is declared TIMESTAMP but the file holds int64" in error.value.message
    assert "declare 'ts' BIGINT" in error.value.hint and "epoch_ms(ts)" in error.value.hint


def test_parquet_timestamps_declared_bigint_are_refused(tmp_path):
    pq.write_table(pa.table({"id": [1], "ts": pa.array([1_704_067_200_000_000], pa.timestamp("us"))}),
                   tmp_path / "events.parquet")
    declared = pa.schema([("id", pa.int64()), ("ts", pa.int64())])
    with pytest.raises(SourceError, match="column 'ts' is declared int64 but the file holds timestamp"):
        read_all(source(tmp_path / "events.parquet", "parquet", declared))


def test_parquet_timestamps_of_any_unit_still_read_as_declared(tmp_path):
    pq.write_table(pa.table({"id": [1], "ts": pa.array([1_704_067_200_500], pa.timestamp("ms"))}),
                   tmp_path / "events.parquet")
    declared = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
    table = read_all(source(tmp_path / "events.parquet", "parquet", declared))
    assert table.column("ts").cast(pa.int64()).to_pylist() == [1_704_067_200_500_000]

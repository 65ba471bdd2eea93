"""The datagen connector: Flink's options, rows a function of (seed, row index), rewindable."""
from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from weir.engine.connectors.registry import create_source
from weir.engine.errors import ConnectorOptionError
from weir.engine.state.key_groups import splitmix64_int, splitmix64_numpy

SCHEMA = pa.schema([("id", pa.int64()), ("age", pa.int32()), ("score", pa.float64()),
                    ("amount", pa.decimal128(7, 2)), ("flag", pa.bool_()), ("name", pa.string()),
                    ("code", pa.string()), ("ts", pa.timestamp("us")), ("day", pa.date32())])
OPTIONS = {"connector": "datagen", "rows-per-second": "1000000000", "seed": "42",
           "fields.id.kind": "sequence", "fields.id.start": "10", "fields.id.end": "309",
           "fields.age.min": "18", "fields.age.max": "65", "fields.score.min": "-1.5", "fields.score.max": "2.5",
           "fields.amount.min": "0", "fields.amount.max": "100", "fields.name.length": "7",
           "fields.name.null-rate": "0.5", "fields.code.kind": "sequence", "fields.code.start": "1",
           "fields.code.end": "100000", "fields.ts.max-past": "5s",
           "fields.day.max-past": "3d"}


def source(batch_size: int = 65536, schema: pa.Schema = SCHEMA, **options: str):
    return create_source({**OPTIONS, **options}, schema, batch_size=batch_size)


def read_all(src, offset=None) -> pa.Table:
    batches = [batch for batch, _ in src.read("0", offset)]
    return pa.Table.from_batches(batches, schema=src.schema)


def test_values_follow_the_options():
    table = read_all(source())
    rows = table.to_pylist()
    assert len(rows) == 300  # the sequence 10..309 ends the source
    assert [r["id"] for r in rows] == list(range(10, 310))
    assert [r["code"] for r in rows] == [str(n) for n in range(1, 301)]
    assert all(18 <= r["age"] <= 65 for r in rows) and len({r["age"] for r in rows}) > 20
    assert all(-1.5 <= r["score"] <= 2.5 for r in rows)
    assert all(0 <= r["amount"] <= 100 and r["amount"].as_tuple().exponent == -2 for r in rows)
    assert {r["flag"] for r in rows} == {True, False}
    names = [r["name"] for r in rows if r["name"] is not None]
    assert 0 < len(names) < 300  # null-rate 0.5
    assert all(len(n) == 7 and set(n) <= set("0123456789abcdef") for n in names)
    # With a seed, row i's "now" is 2024-01-01 + i / rows-per-second; a value is up to max-past before it.
    epoch = datetime(2024, 1, 1)
    for i, r in enumerate(rows):
        now = epoch + timedelta(microseconds=i * 1_000_000 // 1_000_000_000)
        assert now - timedelta(seconds=5) <= r["ts"] <= now
        assert (now - timedelta(days=3)).date() <= r["day"] <= now.date()
    assert len({r["day"] for r in rows}) > 1


def test_number_of_rows_bounds_the_source_and_the_seed_changes_the_draws():
    assert read_all(source(**{"number-of-rows": "25"})).num_rows == 25
    assert source(**{"number-of-rows": "25"}).bounded
    unbounded = create_source({"connector": "datagen"}, pa.schema([("x", pa.int64())]))
    assert not unbounded.bounded
    first = read_all(source(**{"number-of-rows": "50"})).column("age")
    other = read_all(source(**{"number-of-rows": "50", "seed": "43"})).column("age")
    assert first != other


@settings(max_examples=25, deadline=None)
@given(batch_size=st.integers(1, 400), cut=st.integers(0, 300))
def test_the_same_rows_whatever_the_batches_and_from_any_offset(batch_size, cut):
    """Rows are a function of the row index: other batch sizes, or resuming at the offset a
    checkpoint recorded (the rows emitted), give the same rows."""
    whole = read_all(source())
    assert read_all(source(batch_size)).equals(whole)
    offsets = [offset for _, offset in source(batch_size).read("0")]
    resume_at = min([o for o in offsets if o >= cut], default=offsets[-1])
    resumed = read_all(source(batch_size), resume_at)
    assert resumed.equals(whole.slice(resume_at))


@pytest.mark.parametrize("options, message", [
    ({"fields.age.kind": "zigzag"}, "'fields.age.kind' must be 'random' or 'sequence'"),
    ({"fields.age.min": "70"}, "'fields.age.min' (70) is above 'fields.age.max' (65)"),
    ({"fields.id.start": "400"}, "'fields.id.start' (400) is above 'fields.id.end' (309)"),
    ({"fields.ts.kind": "sequence"}, "'sequence' needs a number or STRING column"),
    ({"fields.nope.kind": "random"}, "'fields.nope.kind' names no column of the table"),
    ({"fields.age.colour": "red"}, "has no property 'colour'"),
    ({"fields.flag.min": "1"}, "'fields.flag.min' does not apply: column 'flag' is not a number"),
    ({"fields.age.length": "3"}, "'fields.age.length' does not apply"),
    ({"fields.age.max": "99999999999"}, "leaves the range of int32"),
    ({"fields.name.null-rate": "2"}, "must be a fraction between 0 and 1"),
    ({"fields.age.start": "1"}, "only a 'sequence' has them"),
    ({"rows-per-second": "0"}, "'rows-per-second' must be an integer of at least 1"),
])
def test_bad_options_are_refused_with_the_option_named(options, message):
    with pytest.raises(ConnectorOptionError) as error:
        source(**options)
    assert message in str(error.value)


def test_a_sequence_needs_start_and_end():
    schema = pa.schema([("n", pa.int64())])
    with pytest.raises(ConnectorOptionError, match="'fields.n.end' is missing"):
        create_source({"connector": "datagen", "fields.n.kind": "sequence", "fields.n.start": "1"}, schema)


def test_a_type_it_cannot_generate_is_refused():
    with pytest.raises(ConnectorOptionError, match="cannot generate column 'b' of type binary"):
        create_source({"connector": "datagen"}, pa.schema([("b", pa.binary())]))


def test_the_draws_are_splitmix64_so_they_stay_the_same_across_versions():
    values = [0, 1, 12345, 2**63 + 7, 2**64 - 1]
    assert splitmix64_numpy(np.array(values, dtype=np.uint64)).tolist() == [splitmix64_int(v) for v in values]

"""Sources held to a wall-clock rate: the rate changes when rows come, never which rows."""
from __future__ import annotations

import pyarrow as pa
import pytest

from weir.engine.connectors.nexmark import COLUMNS
from weir.engine.connectors.pacing import paced_batch_size
from weir.engine.connectors.registry import create_source
from weir.engine.errors import ConnectorOptionError


def nexmark_rows(table: str, **options: str) -> tuple[pa.Table, list[int]]:
    schema = pa.schema(list(COLUMNS[table].items()))
    source = create_source({"connector": "nexmark", "table": table, "events": "4000", "splits": "2", **options},
                           schema, batch_size=1024)
    tables, sizes = [], []
    for split in source.splits():
        batches = [batch for batch, _ in source.read(split)]
        sizes += [b.num_rows for b in batches]
        tables.append(pa.Table.from_batches(batches, schema=schema))
    return pa.concat_tables(tables), sizes


@pytest.mark.parametrize("table", ["bid", "auction", "person"])
def test_nexmark_at_a_rate_gives_the_same_events(table):
    unpaced, _ = nexmark_rows(table)
    paced, sizes = nexmark_rows(table, rate="400000")
    assert paced.num_rows > 0 and paced.equals(unpaced)
    # A tenth of a second's rows per batch at most, so a stop or a barrier never waits long.
    assert max(sizes) <= 400000 // 2 // 10


def test_a_rate_is_a_positive_number_of_events():
    with pytest.raises(ConnectorOptionError, match="'rate' must be an integer of at least 1"):
        create_source({"connector": "nexmark", "rate": "0"}, pa.schema([("price", pa.int64())]))


def test_paced_batches_hold_a_tenth_of_a_second_of_rows():
    assert paced_batch_size(65536, None) == 65536
    assert paced_batch_size(65536, 10_000) == 1000
    assert paced_batch_size(65536, 5) == 1
    assert paced_batch_size(500, 1_000_000) == 500

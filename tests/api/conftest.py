"""A connection of the Python API in a temporary working directory."""
from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import weir

T0 = dt.datetime(2024, 1, 1)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


#: Bids: (auction, price, seconds after T0), in event-time order.
BID_ROWS = [(1, 10, 0), (1, 20, 1), (2, 30, 2), (2, 40, 11), (1, 50, 12), (2, 60, 21)]


def bids_table(rows=BID_ROWS) -> pa.Table:
    return pa.table({
        "auction": pa.array([r[0] for r in rows], pa.int64()),
        "price": pa.array([r[1] for r in rows], pa.int64()),
        "date_time": pa.array([at(r[2]) for r in rows], pa.timestamp("ms")),
    })


@pytest.fixture
def con(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    connection = weir.connect(db=str(tmp_path / "results.duckdb"), state_dir=tmp_path / "jobs")
    yield connection
    connection.close()

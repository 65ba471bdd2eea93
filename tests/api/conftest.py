"""A connection of the Python API in a temporary working directory."""
from __future__ import annotations

import pytest

import weir

@pytest.fixture
def con(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    connection = weir.connect(db=str(tmp_path / "results.duckdb"), state_dir=tmp_path / "jobs")
    yield connection
    connection.close()

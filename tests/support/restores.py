"""Watching a restore stream its state: the batches ``RestoredTable`` reads, by size."""
from __future__ import annotations

import pytest

from weir.engine.state.restored import RestoredTable


def record_restore_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row count of every batch a restore reads from now on (``RestoredTable._scan``)."""
    sizes: list[int] = []
    scan = RestoredTable._scan

    def recording(self, columns):
        for batch in scan(self, columns):
            sizes.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(RestoredTable, "_scan", recording)
    return sizes

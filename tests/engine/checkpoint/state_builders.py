"""Snapshots shaped like an operator's, for driving checkpoint storage in tests."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

MAX_PARALLELISM = 128


def accumulators(key_groups: list[int], *, offset: int = 0) -> pa.Table:
    """A window-state table: key_group, a key, a slice, accumulators of several types."""
    n = len(key_groups)
    return pa.table({
        "key_group": pa.array(key_groups, pa.int64()),
        "__k0": pa.array([f"key-{offset + i}" for i in range(n)], pa.string()),
        "__slice_start": pa.array([(offset + i) * 1_000_000 for i in range(n)], pa.int64()),
        "__rows": pa.array([i % 7 + 1 for i in range(n)], pa.int64()),
        "total": pa.array([None if i % 5 == 0 else (offset + i) * 1.5 for i in range(n)], pa.float64()),
        "big": pa.array([10**30 + i for i in range(n)], pa.decimal128(38, 0)),
        "seen": pa.array([(offset + i) * 7 for i in range(n)], pa.timestamp("us")),
    })


def window_snapshot(key_groups: list[int], *, watermark: int = 42, offset: int = 0) -> dict[str, Any]:
    return {
        "version": 1,
        "watermark": watermark,
        "tables": {
            "window_accumulators": accumulators(key_groups, offset=offset),
            "distinct_values_0": pa.table({
                "key_group": pa.array(sorted(key_groups)[::2], pa.int64()),
                "value": pa.array([f"v{offset + i}" for i in range(len(key_groups[::2]))]),
            }),
        },
    }


def key_group_ranges(parallelism: int, max_parallelism: int = MAX_PARALLELISM) -> list[range]:
    """Contiguous key-group ranges, one per subtask, covering all groups."""
    return [range(i * max_parallelism // parallelism, (i + 1) * max_parallelism // parallelism)
            for i in range(parallelism)]


def rows(table: pa.Table) -> list[tuple]:
    """The rows of ``table`` as sortable tuples (None sorts first)."""
    return sorted((tuple((v is not None, v) for v in row.values()) for row in table.to_pylist()))

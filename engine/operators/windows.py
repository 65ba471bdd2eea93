"""Window assigners: which window(s) an event-time row belongs to, and when a window fires.

An assigner maps each row to one *slice*, identified by its start (µs), and
says which slices a watermark closes. State is kept per slice; a window is the
union of its slices. For TUMBLE a window is exactly one slice. HOP and
CUMULATE will cut time into slices of gcd(size, slide) (or the step) and merge
a window's slices when it fires; SESSION will keep intervals and merge
overlapping ones in SQL instead.

Semantics follow Flink: windows are aligned to the epoch plus ``offset``,
``[window_start, window_end)``, ``window_time = window_end - 1 ms``, and a
window fires once the watermark reaches its ``window_time``.
"""
from __future__ import annotations

from typing import Any

from engine.errors import EngineError

#: window_time = window_end - 1 ms: the largest timestamp inside the window
#: at Flink's millisecond resolution; a window fires when the watermark reaches it.
WINDOW_TIME_LAG_US = 1000


class TumblingWindows:
    """Fixed-size, non-overlapping windows: ``window_start = ts - ((ts - offset) mod size)``."""

    kind = "tumble"

    def __init__(self, time_column: str, size: int, offset: int = 0):
        self.time_column = time_column
        self.size = size
        self.offset = offset

    # -- assigning rows -------------------------------------------------
    def slice_start(self, ts: int) -> int:
        """The start of the slice holding ``ts`` (Python's % is already non-negative)."""
        return ts - (ts - self.offset) % self.size

    def slice_start_sql(self, ts_sql: str) -> str:
        """The same as SQL over a BIGINT µs expression (DuckDB's % keeps the dividend's sign)."""
        size, offset = self.size, self.offset
        return f"({ts_sql} - ((({ts_sql} - {offset}) % {size}) + {size}) % {size})"

    # -- window bounds of a slice --------------------------------------
    def window_start_sql(self, slice_start_sql: str) -> str:
        return slice_start_sql

    def window_end_sql(self, slice_start_sql: str) -> str:
        return f"({slice_start_sql} + {self.size})"

    # -- firing ----------------------------------------------------------
    def last_fired_slice(self, watermark: int) -> int:
        """Every slice starting at or before this has fired once the watermark is ``watermark``.

        A window fires when ``window_end - 1 ms <= watermark``, that is when
        ``window_start <= watermark - size + 1 ms``.
        """
        return self.slice_start(watermark - self.size + WINDOW_TIME_LAG_US)

    def first_open_slice(self, watermark: int) -> int:
        """Rows before this timestamp belong to windows that have fired: they are late."""
        return self.last_fired_slice(watermark) + self.size


def window_assigner(window: dict[str, Any], operator_id: str) -> TumblingWindows:
    """Build the assigner that a ``window`` config names."""
    kind = str(window.get("kind", "")).lower()
    if kind != "tumble":
        raise EngineError(
            f"window kind {window.get('kind')!r} is not supported by the window operator yet",
            hint="supported: tumble (hop, cumulate and session are planned)",
            operator_id=operator_id,
        )
    size, offset = int(window["size"]), int(window.get("offset") or 0)
    if size <= 0:
        raise EngineError(
            f"window size must be positive, got {size} µs", operator_id=operator_id
        )
    return TumblingWindows(window["time_column"], size, offset)

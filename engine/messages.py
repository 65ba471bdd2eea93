"""The in-band control messages that travel with the data, in order.

Data itself is a ``pyarrow.RecordBatch``. Event time inside the engine is an
integer number of microseconds since the epoch.
"""
from __future__ import annotations

from dataclasses import dataclass

#: The watermark a bounded source sends after its last row: fires every window.
MAX_WATERMARK = 2**63 - 1
#: The watermark before any row has been seen.
MIN_WATERMARK = -(2**63)


@dataclass(frozen=True)
class Watermark:
    """No row with an event time at or below ``timestamp`` (µs) will follow."""

    timestamp: int


@dataclass(frozen=True)
class Barrier:
    """Checkpoint ``checkpoint_id`` cuts the stream here; never overtakes records."""

    checkpoint_id: int
    is_savepoint: bool = False


@dataclass(frozen=True)
class EndOfInput:
    """The input is exhausted; a final ``Watermark(MAX_WATERMARK)`` precedes it."""

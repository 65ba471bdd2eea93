"""The event-time clock of a windowed operator: the current watermark.

Watermarks are integers, µs since the epoch. The clock only moves forward: a
watermark at or below the current one changes nothing.
"""
from __future__ import annotations

from weir.engine.messages import MIN_WATERMARK


class EventTimeClock:
    def __init__(self, watermark: int = MIN_WATERMARK):
        self.watermark = watermark

    @property
    def started(self) -> bool:
        """True once a watermark arrived: before that no row can be late."""
        return self.watermark > MIN_WATERMARK

    def advance(self, watermark: int) -> bool:
        """Move to ``watermark``; False if it does not advance the clock."""
        if watermark <= self.watermark:
            return False
        self.watermark = watermark
        return True

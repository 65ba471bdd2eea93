"""The clocks of an operator: event time (the current watermark) and processing time.

Watermarks are integers, µs since the epoch. The clock only moves forward: a
watermark at or below the current one changes nothing. ``now_ms`` is processing
time, for state retention.
"""
from __future__ import annotations

import time

from weir.engine.messages import MIN_WATERMARK


def now_ms() -> int:
    """Processing time in ms since the epoch, for state retention (tests replace it in the
    module that uses it)."""
    return int(time.time() * 1000)


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

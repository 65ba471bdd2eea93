"""Holding a generated source to a rate of wall-clock time, without spinning.

A paced source ('rows-per-second' of datagen, 'rate' of nexmark) cuts its
output into batches of about a tenth of a second's worth of rows
(``paced_batch_size``), so that the executor reaches a batch boundary — where
barriers, stop requests and control messages are handled — at least ten times
a second, and sleeps before each batch until the wall clock says it is due.
What is generated never depends on the rate or the batch size: only when it is.
"""
from __future__ import annotations

import time

#: Batches per second of a paced source at most (a batch is about 1 / this of a second's rows).
BATCHES_PER_SECOND = 10
#: A source behind its schedule by more than this many seconds (the job was busy: a checkpoint,
#: a window firing) starts a new schedule instead of catching up in a burst.
MAX_LAG_SECONDS = 1.0


def paced_batch_size(batch_size: int, rate: float | None) -> int:
    """Rows per batch: ``batch_size``, or fewer at a rate, so that a batch is at most a tenth
    of a second's worth."""
    if rate is None:
        return batch_size
    return max(1, min(batch_size, int(rate // BATCHES_PER_SECOND)))


class Pacer:
    """``wait(rows)`` sleeps until ``rows`` rows (counted from the first call) are due at ``rate``
    rows per second of wall clock; with no rate it never waits."""

    def __init__(self, rate: float | None):
        self.rate = rate
        self._start: float | None = None
        self._base = 0

    def wait(self, rows: int) -> None:
        if self.rate is None:
            return
        now = time.monotonic()
        if self._start is None:
            self._start, self._base = now, rows
            return
        due = self._start + (rows - self._base) / self.rate
        if now - due > MAX_LAG_SECONDS:
            self._start, self._base = now, rows
        elif due > now:
            time.sleep(due - now)

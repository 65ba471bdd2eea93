"""HeldRows: an input's rows held in Arrow until their window fires.

A window join keeps every row of a window until the watermark passes its end, and then reads
them once. Copying each batch into DuckDB on arrival, and out again at the firing, cost three
statements per batch (register, insert, unregister); held as the Arrow batches they came in
(zero-copy: the batch's own columns), they cost nothing until the firing, which registers the
fired rows with DuckDB as one view.

1. ``add`` keeps a batch whose first column is its rows' window_end (µs, never NULL), with
   that column's minimum and maximum, and answers the minimum.
2. ``split(upto)`` cuts the held rows into those of windows with ``window_end <= upto`` and the
   rest: whole batches where their range is on one side; a batch that straddles ``upto`` is
   cut in two slices when its rows are in window order (the usual case: no copy), else
   filtered. Nothing changes until ``keep`` takes the rest.
3. ``take`` hands every held batch over (to move them into DuckDB when they grow large, or for a
   snapshot) and holds none.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc


class HeldRows:
    """Batches of one input, each with the least and greatest window_end of its rows."""

    def __init__(self) -> None:
        self._batches: list[tuple[pa.RecordBatch, int, int]] = []
        #: The held rows' Arrow size in bytes.
        self.nbytes = 0
        #: The schema of the batches held (None before the first).
        self.schema: pa.Schema | None = None

    def __bool__(self) -> bool:
        return bool(self._batches)

    def add(self, rows: pa.RecordBatch) -> int:
        """Hold ``rows`` (window_end first, no NULL in it); their least window_end."""
        bounds = pc.min_max(rows.column(0))
        low = bounds["min"].as_py()
        self._batches.append((rows, low, bounds["max"].as_py()))
        self.nbytes += rows.nbytes
        self.schema = rows.schema
        return low

    def earliest_end(self) -> int | None:
        return min((low for _, low, _ in self._batches), default=None)

    def split(self, upto: int) -> tuple[list[pa.RecordBatch], list[tuple[pa.RecordBatch, int, int]]]:
        """The batches of rows with ``window_end <= upto``, and what stays held (for ``keep``)."""
        fired, rest = [], []
        for held in self._batches:
            rows, low, high = held
            if high <= upto:
                fired.append(rows)
            elif low > upto:
                rest.append(held)
            else:
                mask = pc.less_equal(rows.column(0), pa.scalar(upto, pa.int64()))
                count = pc.sum(mask).as_py()
                if pc.all(mask.slice(0, count)).as_py():  # rows in time order: two slices, no copy
                    now, later = rows.slice(0, count), rows.slice(count)
                else:
                    now, later = rows.filter(mask), rows.filter(pc.invert(mask))
                fired.append(now)
                rest.append((later, pc.min(later.column(0)).as_py(), high))
        return fired, rest

    def keep(self, rest: list[tuple[pa.RecordBatch, int, int]]) -> None:
        """Hold only ``rest`` (from ``split``): the fired rows are gone."""
        self._batches = rest
        self.nbytes = sum(rows.nbytes for rows, _, _ in rest)

    def batches(self) -> list[pa.RecordBatch]:
        return [rows for rows, _, _ in self._batches]

    def take(self) -> list[pa.RecordBatch]:
        """Every held batch; none is held after."""
        taken = self.batches()
        self.keep([])
        return taken

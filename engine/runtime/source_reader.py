"""Reads a source's splits round-robin and derives its watermark.

Reading one batch from each split in turn keeps the splits' event times
close together, so that the minimum of their watermarks advances steadily.
"""
from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

from engine.connectors.base import Source
from engine.messages import MAX_WATERMARK, Watermark
from engine.watermarks import SplitWatermarks, WatermarkGenerator


class SourceReader:
    def __init__(self, source: Source, watermark_sql: str | None, offsets: dict[str, Any] | None = None):
        self.source = source
        self.splits = source.splits()
        self.offsets: dict[str, Any] = dict(offsets or {})
        self._generator = WatermarkGenerator(watermark_sql) if watermark_sql else None
        self.watermarks = SplitWatermarks(self.splits)
        self.rows_read = 0

    def __iter__(self) -> Iterator[pa.RecordBatch | Watermark]:
        """Batches interleaved with the watermarks they advance; ends with MAX_WATERMARK."""
        readers = {s: iter(self.source.read(s, self.offsets.get(s))) for s in self.splits}
        while readers:
            for split in list(readers):
                step = next(readers[split], None)
                if step is None:
                    del readers[split]
                    advanced = self.watermarks.finish(split)
                else:
                    batch, self.offsets[split] = step
                    if batch.num_rows == 0:
                        continue
                    self.rows_read += batch.num_rows
                    yield batch
                    candidate = self._generator.max_of(batch) if self._generator else None
                    advanced = self.watermarks.observe(split, candidate)
                if advanced is not None and advanced != MAX_WATERMARK and self._generator:
                    yield Watermark(advanced)
        self.watermarks.current = MAX_WATERMARK
        yield Watermark(MAX_WATERMARK)

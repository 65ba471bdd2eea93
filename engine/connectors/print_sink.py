"""The ``print`` sink: rows to stdout as Flink prints them, '+I[1001, 2024-01-01 00:00:00, 3]'.

With 'print-identifier' = 'bids' each line starts with 'bids> '. Rows are
printed as they arrive, so the sink is at-least-once: a restored job prints
again what followed its checkpoint.
"""
from __future__ import annotations

import sys
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Sink
from weir.engine.connectors.text_format import changelog_lines


class PrintSink(Sink):
    transactional = False

    def __init__(self, options: dict[str, str], schema: pa.Schema, *, stream: TextIO | None = None, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        identifier = options.get("print-identifier")
        self.prefix = f"{identifier}> " if identifier else ""
        self.stream = stream

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        lines = changelog_lines(batch)
        if self.prefix:
            lines = pc.binary_join_element_wise(self.prefix, lines, "")
        stream = self.stream or sys.stdout  # looked up late: tests and the shell redirect it
        stream.write("\n".join(lines.to_pylist()) + "\n")

    def finish(self) -> None:
        (self.stream or sys.stdout).flush()


SPEC = ConnectorSpec(
    name="print",
    source=None,
    sink=PrintSink,
    options={"print-identifier": OptionSpec("a prefix for every printed line")},
)

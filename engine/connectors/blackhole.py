"""The ``blackhole`` sink: discards every row (for benchmarks and dry runs)."""
from __future__ import annotations

import pyarrow as pa

from weir.engine.connectors.base import ConnectorSpec, Sink


class BlackholeSink(Sink):
    transactional = False

    def write(self, batch: pa.RecordBatch) -> None:
        pass


SPEC = ConnectorSpec(name="blackhole", source=None, sink=BlackholeSink)

"""The operator at the end of a pipeline: hands rows to a sink connector."""
from __future__ import annotations

import pyarrow as pa

from weir.engine.connectors.base import Sink
from weir.engine.operators.base import Operator, OperatorContext


class SinkWriter(Operator):
    def __init__(self, sink: Sink, ctx: OperatorContext):
        super().__init__({}, ctx)
        self.sink = sink
        # In a parallel job's worker, the coordinator commits a sink that has a global committer.
        if sink.global_commit and ctx.parallelism > 1:
            sink.committed_elsewhere = True
        #: Set by the executor when the job resumes from a checkpoint.
        self.resuming = False

    def open(self) -> None:
        self.sink.open(resuming=self.resuming)

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        schema = self.sink.schema
        if batch.schema != schema:
            # Same columns by position; names and (planner-checked) types follow the sink.
            batch = pa.RecordBatch.from_arrays(batch.columns, names=schema.names).cast(schema)
        self.sink.write(batch)
        return []

    def finish(self) -> list[pa.RecordBatch]:
        self.sink.finish()
        return []

    def close(self) -> None:
        self.sink.abort()

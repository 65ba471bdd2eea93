"""The operator at the end of a pipeline: hands rows to a sink connector."""
from __future__ import annotations

from typing import Any

import pyarrow as pa

from weir.engine.connectors.base import Sink
from weir.engine.connectors.registry import CONNECTORS
from weir.engine.operators.base import Operator, OperatorContext, explain_lines


class SinkWriter(Operator):
    """The kind "sink": its output is pre-committed at a barrier and committed with the checkpoint."""

    commits_output = True

    @classmethod
    def explain(cls, config: dict[str, Any]) -> list[str]:
        spec = CONNECTORS.get(config["options"].get("connector", ""))
        if spec is not None and spec.sink is not None and not spec.sink.transactional:
            return explain_lines("-", "none (written as it arrives, not transactional)")
        return explain_lines("-", "output staged until the checkpoint commits (exactly-once)")

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

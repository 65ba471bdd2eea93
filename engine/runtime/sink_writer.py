"""The operator at the end of a pipeline: hands rows to a sink connector."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pyarrow as pa

from weir.engine.connectors.base import Sink
from weir.engine.connectors.registry import CONNECTORS
from weir.engine.operators.base import Operator, OperatorContext, explain_lines
from weir.engine.operators.config import OperatorConfig, optional


@dataclass(frozen=True)
class SinkConfig(OperatorConfig):
    """A sink node: the table it writes and how it takes an updating stream."""

    #: The table's WITH (...) options ('connector', ...; 'sink.upsert-key' for a keyed table).
    options: dict[str, str] = dataclasses.field(default_factory=dict)
    #: The table's name.
    table: str = ""
    #: How it takes an updating stream (``planner.changelog.sink_changelog``): "upsert" or
    #: "retract"; None: an append-only sink of append-only rows.
    changelog: str | None = optional()
    #: The upsert sink's key columns.
    upsert_key: tuple[str, ...] | None = optional()


class SinkWriter(Operator):
    """The kind "sink": its output is pre-committed at a barrier and committed with the checkpoint."""

    Config = SinkConfig
    commits_output = True

    @classmethod
    def explain(cls, config: SinkConfig) -> list[str]:
        spec = CONNECTORS.get(config.options.get("connector", ""))
        if spec is not None and spec.sink is not None and not spec.sink.commits_transactionally(config.options):
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

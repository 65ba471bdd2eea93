"""The operator interface: hooks that do nothing by default.

An operator sees batches, watermarks and lifecycle calls and returns output
batches. It never sees channels or barriers: the task around it aligns
barriers and calls ``snapshot`` at the right moment.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa

from weir.engine.operators.duckdb_sql import execute
from weir.engine.state.key_groups import range_for_subtask
from weir.engine.state.memory import ManagedMemory


#: The counter of rows dropped because their event time is NULL (no window, no join bound).
NULL_TIME_ROWS_DROPPED = "null_time_rows_dropped"


def late_counter(source: str) -> str:
    """The counter of rows from ``source`` dropped as late (summed over operators and workers)."""
    return f"late_rows_dropped[{source}]"


def without_output_names(shape: dict[str, Any]) -> dict[str, Any]:
    """A join's state shape without its sides' output ``names``: renaming a column keeps the state."""
    return {key: ({k: v for k, v in value.items() if k != "names"} if isinstance(value, dict) else value)
            for key, value in shape.items()}


@dataclass
class OperatorContext:
    operator_id: str
    output_schema: pa.Schema
    subtask_index: int = 0
    parallelism: int = 1
    max_parallelism: int = 128
    #: Counters shown in the job summary: rows_in, rows_out, late_rows_dropped, ...
    metrics: dict[str, int] = field(default_factory=dict)
    #: 'duckdb': state tables spill beyond their share of managed memory, so state
    #: larger than memory works; 'memory': state stays in memory.
    state_backend: str = "duckdb"
    spill_dir: str | None = None
    #: The managed memory of this process (``engine.state.memory``), shared by its state
    #: connections; None: a share of this machine's (or cgroup's) memory, spilling to ``spill_dir``.
    memory: ManagedMemory | None = None
    #: A fixed DuckDB memory_limit for this operator's state (tests), instead of a share of ``memory``.
    memory_limit: str | None = None
    #: Per input: the source tables its rows come from ('bids'; 'auctions+bids' after a join).
    input_sources: list[str] = field(default_factory=list)
    #: Late rows handed to ``LATE_ROWS_PORT`` since the executor last collected them.
    late_output: list[pa.RecordBatch] = field(default_factory=list)

    def count(self, name: str, n: int) -> None:
        self.metrics[name] = self.metrics.get(name, 0) + n

    def count_late(self, n: int, input_index: int = 0) -> None:
        """``n`` rows of input ``input_index`` dropped as late: counted in ``late_rows_dropped``
        and per source table in ``late_rows_dropped[<table>]`` (``late_counter``)."""
        if n:
            self.count("late_rows_dropped", n)
            if input_index < len(self.input_sources):
                self.count(late_counter(self.input_sources[input_index]), n)

    def owned_key_groups(self) -> range:
        """The key groups this subtask owns."""
        return range_for_subtask(self.subtask_index, self.parallelism, self.max_parallelism)

    def state_connection(self, *, preserve_insertion_order: bool = True) -> duckdb.DuckDBPyConnection:
        """A private DuckDB database for this operator's state tables: with the 'duckdb' backend it
        is limited to a share of managed memory and spills to a directory of its own under
        ``spill_dir``. ``preserve_insertion_order=False`` where no statement relies on the order
        rows were inserted (DuckDB then needs less memory for large results)."""
        if self.state_backend == "memory":
            connection = duckdb.connect(":memory:")
            connection.execute("SET temp_directory = ''")
        else:
            if self.memory is None:
                self.memory = ManagedMemory.for_job({}, parallelism=self.parallelism, spill_dir=self.spill_dir)
            connection = self.memory.connect(self.operator_id, preserve_insertion_order=preserve_insertion_order)
        if self.memory_limit:
            connection.execute("SET memory_limit = ?", [self.memory_limit])
        if self.parallelism > 1:
            connection.execute("SET threads = 1")  # one core per subtask: the workers share the machine
        return connection


class Operator:
    """Base class. Subclasses override the hooks they need."""

    #: The parts of the config this operator's state depends on: a snapshot taken with other
    #: values does not fit, and restore refuses it (``state_shape``). Empty: nothing to restore.
    STATE_CONFIG: tuple[str, ...] = ()
    #: What the operator does with each row's arrival watermark (``engine.watermarks``): "use"
    #: (it judges lateness per row with it), "pass" (it hands it on with the rows), or None —
    #: then the runtime strips the column before the operator sees a batch.
    arrival_watermark: str | None = None

    def __init__(self, config: dict[str, Any], ctx: OperatorContext):
        self.config = config
        self.ctx = ctx

    def open(self) -> None:
        """Create state tables, connections. Called once before any data."""

    def process_batch(self, batch: pa.RecordBatch, input_index: int = 0) -> list[pa.RecordBatch]:
        return [batch]

    def process_watermark(self, watermark: int) -> list[pa.RecordBatch]:
        """The combined input watermark advanced to ``watermark`` (µs)."""
        return []

    def output_watermark(self, watermark: int) -> int:
        """The watermark passed downstream once this operator has processed ``watermark``: the
        same, unless the operator emits rows older than its watermark (an interval join)."""
        return watermark

    @classmethod
    def state_shape(cls, config: dict[str, Any]) -> dict[str, Any] | None:
        """What a snapshot of this operator depends on (keys, accumulators, window geometry...),
        JSON-able; None for an operator without state. Checkpoints record it, and restore
        refuses a snapshot whose shape differs, naming what changed."""
        if not cls.STATE_CONFIG:
            return None
        return {key: config.get(key) for key in cls.STATE_CONFIG}

    def snapshot(self) -> Any:
        """A consistent copy of the state (the synchronous part of a checkpoint)."""
        return None

    def restore(self, state: Any) -> None:
        """Load what ``snapshot`` returned."""

    def finish(self) -> list[pa.RecordBatch]:
        """End of input: flush what is left. The final watermark was already delivered."""
        return []

    def close(self) -> None:
        """Release resources; called after finish or on failure."""


class StateOperator(Operator):
    """An operator whose state lives in tables of a private DuckDB database
    (``OperatorContext.state_connection``), opened on first use."""

    def __init__(self, config: dict[str, Any], ctx: OperatorContext):
        super().__init__(config, ctx)
        self.con: duckdb.DuckDBPyConnection | None = None

    def open(self) -> None:
        if self.con is None:
            self.con = self.ctx.state_connection()
            self.create_state()

    def create_state(self) -> None:
        """Create what a fresh connection needs (state tables, a side input); nothing by default."""

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None

    def _run(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a statement on the state connection (errors name the operator)."""
        return execute(self.con, sql, self.ctx.operator_id)

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

from weir.engine.operators.config import OperatorConfig
from weir.engine.operators.duckdb_sql import execute
from weir.engine.state.key_groups import range_for_subtask
from weir.engine.state.memory import ManagedMemory
from weir.engine.udfs import register_functions


#: The counter of rows dropped because their event time is NULL (no window, no join bound).
NULL_TIME_ROWS_DROPPED = "null_time_rows_dropped"


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
    #: Rows dropped as late, per source table of their input (``count_late``).
    late_by_source: dict[str, int] = field(default_factory=dict)
    #: Late rows handed to ``LATE_ROWS_PORT`` since the executor last collected them.
    late_output: list[pa.RecordBatch] = field(default_factory=list)

    def count(self, name: str, n: int) -> None:
        self.metrics[name] = self.metrics.get(name, 0) + n

    def count_late(self, n: int, input_index: int = 0) -> None:
        """``n`` rows of input ``input_index`` dropped as late: counted in ``late_rows_dropped``
        and per source table of the input in ``late_by_source``."""
        if n:
            self.count("late_rows_dropped", n)
            if input_index < len(self.input_sources):
                source = self.input_sources[input_index]
                self.late_by_source[source] = self.late_by_source.get(source, 0) + n

    def owned_key_groups(self) -> range:
        """The key groups this subtask owns."""
        return range_for_subtask(self.subtask_index, self.parallelism, self.max_parallelism)

    def state_connection(self, *, preserve_insertion_order: bool = True,
                         max_threads: int | None = None) -> duckdb.DuckDBPyConnection:
        """A private DuckDB database for this operator's state tables: with the 'duckdb' backend it
        is limited to a share of managed memory and spills to a directory of its own under
        ``spill_dir``. ``preserve_insertion_order=False`` where no statement relies on the order
        rows were inserted (DuckDB then needs less memory for large results). ``max_threads``
        caps DuckDB's threads for an operator whose statements are too small to share out."""
        if self.state_backend == "memory":
            connection = duckdb.connect(":memory:")
            connection.execute("SET temp_directory = ''")
            if max_threads:
                connection.execute(f"SET threads = {max_threads}")
        else:
            if self.memory is None:
                self.memory = ManagedMemory.for_job({}, parallelism=self.parallelism, spill_dir=self.spill_dir)
            connection = self.memory.connect(self.operator_id, preserve_insertion_order=preserve_insertion_order,
                                             max_threads=max_threads)
        if self.memory_limit:
            connection.execute("SET memory_limit = ?", [self.memory_limit])
        if self.parallelism > 1:
            connection.execute("SET threads = 1")  # one core per subtask: the workers share the machine
        register_functions(connection)  # the job's Python UDFs (engine.udfs)
        return connection


def explain_lines(key: str, state: str) -> list[str]:
    """An operator's own EXPLAIN lines (``OperatorKind.explain``): its key and its state."""
    return [f"key:       {key}", f"state:     {state}"]


def _config_entry(config: OperatorConfig, path: str) -> Any:
    """``config.left.keys`` for ``path`` "left.keys"."""
    value: Any = config
    for part in path.split("."):
        value = getattr(value, part, None)
    return value


class OperatorKind:
    """What a kind of node of a JobGraph *is*, declared once on its class.

    The runtime, the exchange, the checkpoint coordinator and EXPLAIN ask the class
    (``engine.operators.registry.operator_class(kind)``); no list of kinds elsewhere holds
    these facts. Every operator is one (``Operator``), and so are the runtime's
    ``SourceReader`` and ``SinkWriter`` for the kinds "source" and "sink". Traits, with
    their defaults (nothing special):

    - ``keyed_by``: the config entries naming the columns its state is partitioned by
      ("keys", or "left.keys" and "right.keys" per input; ``()``: keyed by no column, one
      group); None: not keyed. Every edge into a keyed operator is an exchange
      (``engine.runtime.exchange.routing``; a forward edge: every row to one subtask).
    - ``STATE_CONFIG``: the config entries its state depends on; not empty = ``stateful``.
      Checkpoints record ``state_shape(config)``, and restore refuses a snapshot whose shape
      differs (``engine.checkpoint.coordinator``).
    - ``merges_snapshots``: ``merge_snapshots`` merges the snapshots of several subtasks (a
      restore at another parallelism); else a restore takes the one snapshot there is.
    - ``windowed``: its state is per event-time window (EXPLAIN ANALYZE always shows its late
      rows; a source's late-rows table is fed by it, ``planner.late_rows``).
    - ``late_rows_table``: it can hand the rows it drops as late to its late-rows port
      (config ``late_rows``, ``engine.operators.late_rows``).
    - ``drops_late_rows``: it drops rows behind its watermark and counts them
      (``OperatorContext.count_late``).
    - ``holds_watermark_back``: ``output_watermark`` passes on less than its watermark.
    - ``arrival_watermark``: what it does with each row's arrival watermark (below).
    - ``pre_aggregates``: two-phase aggregation: where ``combines`` (its config) and keyed by exactly
      the exchange's keys, the sending subtask calls ``pre_aggregate`` and only partials cross.
    - ``takes_key_groups``: keyed by exactly the exchange's keys, it reads the rows' key groups
      from the exchange (``exchange.carries_key_groups``) instead of hashing them again.
    - ``commits_output``: a sink: it emits nothing, pre-commits its output at a barrier and
      commits it when the checkpoint completes.
    - ``reads_source``: a source: the runtime reads it (``SourceReader``); no operator runs.

    Besides the traits the class renders its EXPLAIN lines (``explain``) and says which input
    columns it reads (``input_expressions``), both from its config: an instance of its
    ``Config``, a frozen dataclass next to the class (``engine.operators.config``); the entries
    ``keyed_by`` and ``STATE_CONFIG`` name are fields of it (the runtime's source and sink
    have ``SourceConfig`` and ``SinkConfig``).
    """

    #: The class of this kind's config (an ``OperatorConfig`` dataclass); None: a plain dict.
    Config: type[OperatorConfig] | None = None
    keyed_by: tuple[str, ...] | None = None
    #: The parts of the config this operator's state depends on: a snapshot taken with other
    #: values does not fit, and restore refuses it (``state_shape``). Empty: nothing to restore.
    STATE_CONFIG: tuple[str, ...] = ()
    merges_snapshots: bool = False
    windowed: bool = False
    late_rows_table: bool = False
    drops_late_rows: bool = False
    holds_watermark_back: bool = False
    #: What the operator does with each row's arrival watermark (``engine.watermarks``): "use"
    #: (it judges lateness per row with it), "pass" (it hands it on with the rows), or None —
    #: then the runtime strips the column before the operator sees a batch.
    arrival_watermark: str | None = None
    pre_aggregates: bool = False
    takes_key_groups: bool = False
    commits_output: bool = False
    reads_source: bool = False

    @classmethod
    def keyed(cls) -> bool:
        return cls.keyed_by is not None

    @classmethod
    def stateful(cls) -> bool:
        return bool(cls.STATE_CONFIG)

    @classmethod
    def typed(cls, config: Any) -> Any:
        """``config`` as this kind's ``Config`` (a JSON dict is read into it: ``TypeError`` for
        a missing or unknown field); as it is for a kind without one."""
        if cls.Config is None or isinstance(config, cls.Config):
            return config
        return cls.Config.from_json(config)

    @classmethod
    def state_shape(cls, config: Any) -> dict[str, Any] | None:
        """What a snapshot of this operator depends on (keys, accumulators, window geometry...),
        JSON-able; None for an operator without state. Checkpoints record it, and restore
        refuses a snapshot whose shape differs, naming what changed. ``config`` is a ``Config``
        or its JSON (an older checkpoint records only the config)."""
        if not cls.STATE_CONFIG:
            return None
        data = config.to_json() if isinstance(config, OperatorConfig) else config
        return {key: data.get(key) for key in cls.STATE_CONFIG}

    @staticmethod
    def merge_snapshots(snapshots: list[Any]) -> Any:
        """The snapshots of several subtasks as one (where ``merges_snapshots``)."""
        raise NotImplementedError("this operator does not merge snapshots")

    @classmethod
    def key_expressions(cls, config: Any, input_index: int = 0) -> list[str]:
        """The keys of input ``input_index`` as SQL over that input (``keyed_by``; a key
        given as (output name, SQL) is its SQL)."""
        if not cls.keyed_by:
            return []
        entry = _config_entry(cls.typed(config), cls.keyed_by[min(input_index, len(cls.keyed_by) - 1)]) or ()
        return [key[1] if isinstance(key, (list, tuple)) else key for key in entry]

    @classmethod
    def input_expressions(cls, config: dict[str, Any]) -> list[str] | None:
        """SQL over the input naming every input column the operator reads, so that only those
        cross an exchange (``exchange.needed_columns``); None (the default): every column."""
        return None

    @classmethod
    def explain(cls, config: dict[str, Any]) -> list[str]:
        """The operator's own EXPLAIN lines (``explain_lines``: key and state), from its config."""
        return explain_lines("-", "none")


class Operator(OperatorKind):
    """Base class. Subclasses override the hooks they need, and declare their traits
    (``OperatorKind``)."""

    def __init__(self, config: Any, ctx: OperatorContext):
        #: An instance of ``Config`` (a JSON dict given here is read into one).
        self.config = self.typed(config)
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
        same, unless the operator emits rows older than its watermark (an interval join:
        ``holds_watermark_back``)."""
        return watermark

    @property
    def combinable(self) -> bool:
        """Whether, with this config, rows may become partials before the exchange
        (``pre_aggregates``, ``pre_aggregate``; ``combines``)."""
        return self.combines(self.config)

    @classmethod
    def combines(cls, config: Any) -> bool:
        """``combinable`` from the config alone, so that EXPLAIN (``exchange.pre_aggregated``)
        and the runtime ask the same question."""
        return False

    def pre_aggregate(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The local phase of a two-phase aggregate (``pre_aggregates``): ``batch`` as partials."""
        raise NotImplementedError(f"{type(self).__name__} does not pre-aggregate")

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

    def __init__(self, config: Any, ctx: OperatorContext):
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

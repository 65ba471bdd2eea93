"""The connector interfaces: sources read splits, sinks write and commit.

Every batch a source yields conforms to the table's declared schema: the
declared columns in declared order, with their declared Arrow types
(timestamps as ``timestamp[us]``).
"""
from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa

DEFAULT_BATCH_SIZE = 65536


@dataclass(frozen=True)
class OptionSpec:
    description: str
    required: bool = False
    default: str | None = None
    #: Allowed values, if the option is an enumeration.
    choices: tuple[str, ...] = ()
    #: What the value must parse as: 'string', 'int' (>= 0), 'positive-int',
    #: 'bool' ('true'/'false'), 'size' ('128MB', '4kb'), 'duration' ('30s', '500ms'),
    #: 'char' (one character) or 'timestamp'.
    value_type: str = "string"


@dataclass
class ConnectorSpec:
    """What the planner needs to validate a WITH (...) clause."""

    name: str
    source: type["Source"] | None
    sink: type["Sink"] | None
    options: dict[str, OptionSpec] = field(default_factory=dict)
    #: Format-specific options, by format: {'csv': {'csv.ignore-parse-errors': ...}}.
    format_options: dict[str, dict[str, OptionSpec]] = field(default_factory=dict)
    #: Formats a sink writes but a source cannot read ('debezium-json').
    sink_only_formats: tuple[str, ...] = ()
    #: Formats that carry each row's change kind, so an updating result can be written.
    changelog_formats: tuple[str, ...] = ()
    #: Keys starting with one of these belong to the connector, which checks them when the
    #: source is made (datagen's 'fields.<column>.kind'), or to its client (Kafka's
    #: 'properties.*'): they are no unknown keys.
    option_prefixes: tuple[str, ...] = ()
    #: A sink keyed by the table's PRIMARY KEY that takes an updating stream as upserts
    #: ('upsert-kafka'); as a source, it is an updating table.
    keyed_by_primary_key: bool = False


def option_value(options: dict[str, str], spec: ConnectorSpec, key: str) -> str | None:
    """The value of ``key`` in a WITH (...) clause, or the spec's default for it."""
    if key in options:
        return options[key]
    found = spec.options.get(key)
    if found is None:
        for by_format in spec.format_options.values():
            found = by_format.get(key) or found
    return found.default if found is not None else None


def split_hash(text: str) -> int:
    """A stable 64-bit hash of a split id (or a part of one), the same in every process."""
    return int.from_bytes(hashlib.md5(text.encode()).digest()[:8], "little")


class Source(ABC):
    """A bounded or unbounded source of Arrow batches, split into splits.

    The runtime reads the splits of a source round-robin, one batch at a time
    (splits of one chain one after another), keeps a watermark per split and
    combines them by minimum. A parallel job divides the splits among its workers.
    """

    def __init__(self, options: dict[str, str], schema: pa.Schema, *, batch_size: int = DEFAULT_BATCH_SIZE):
        self.options = options
        self.schema = schema
        self.batch_size = batch_size
        #: Malformed rows skipped because '<format>.ignore-parse-errors' is on.
        self.skipped_rows = 0

    @abstractmethod
    def splits(self) -> list[str]:
        """Stable split ids (a file path, a generator number)."""

    def chain(self, split: str) -> str:
        """Splits with the same chain are read one after another (the row groups of one
        file, in order); only the one being read holds the watermark back. By default
        every split is a chain of its own, and all are read round-robin."""
        return split

    @abstractmethod
    def read(self, split: str, offset: Any = None) -> Iterator[tuple[pa.RecordBatch, Any]]:
        """Yield (batch, offset after that batch). ``offset`` resumes a split
        after a recorded position; offsets are JSON-able."""

    @property
    def bounded(self) -> bool:
        return True

    #: Whether the source's batch boundaries are arbitrary (sized by 'weir.source.batch-size', as
    #: files and generators cut them), so the reader may merge consecutive batches of a bounded
    #: source. False by default: a batch a user hands weir (a Python source) is theirs, and an
    #: updating query's changelog follows it.
    arbitrary_batches: bool = False

    #: Seconds between re-listings of ``splits()`` while an unbounded source runs: splits that
    #: appear are read from ``discovered_offset`` (Kafka partitions added to a topic). None: never.
    discovery_interval: float | None = None

    def discovered_offset(self, split: str) -> Any:
        """The offset a split found by re-listing is read from (None: as a split at startup)."""
        return None

    def owner(self, split: str, parallelism: int) -> int:
        """The subtask of ``parallelism`` that reads ``split``, whether listed at the start or
        found by re-listing: a function of the split alone, so every subtask agrees without
        coordination. By default a numbered split ('0', '1', ...: a generator's) goes to its
        number mod ``parallelism``, another to a stable hash of its id (MD5: crc32 mod a small
        number puts ids that differ in one character, 'part-0.csv' ... 'part-4.csv', together)."""
        if split.isdigit():
            return int(split) % parallelism
        return split_hash(split) % parallelism

    def snapshot_offset(self, split: str, offset: Any) -> Any:
        """The JSON form of a split's offset, for a checkpoint (``read`` resumes from it). By
        default the offset itself; an offset that holds state in memory (upsert-kafka's last
        row per key) is written out here, once a checkpoint rather than after every batch."""
        return offset

    def project(self, columns: list[str]) -> None:
        """Only ``columns`` of the schema are read downstream: a source whose format can skip
        the others may (its batches then hold just these, in schema order). By default it
        reads every column."""

    def checkpoint_complete(self, offsets: dict[str, Any]) -> None:
        """A checkpoint that recorded these split offsets (this reader's) is complete: for
        information only (Kafka commits them to its consumer group); reading never uses it."""


class Sink(ABC):
    """Receives the rows of one INSERT or materialized view.

    Output becomes visible only on ``commit``: the runtime pre-commits at a
    checkpoint barrier and commits when the checkpoint completes; without
    checkpointing, ``finish`` commits everything at the end of the job.
    """

    #: True where output is committed transactionally (exactly-once).
    transactional = True

    @classmethod
    def commits_transactionally(cls, options: dict[str, str]) -> bool:
        """Whether a sink with these options commits its output at checkpoints (exactly-once):
        ``transactional``, unless an option chooses (Kafka's 'sink.delivery-guarantee')."""
        return cls.transactional
    #: True where a checkpoint's output is one transaction for all subtasks: a parallel job's
    #: coordinator commits it once, from every subtask's handles (Flink's global committer), and
    #: the subtasks' own ``commit`` only forgets what they pre-committed.
    global_commit = False

    def __init__(self, options: dict[str, str], schema: pa.Schema, *, subtask_index: int = 0):
        self.options = options
        self.schema = schema
        self.subtask_index = subtask_index

    def open(self, resuming: bool = False) -> None:
        """Prepare to write. ``resuming``: the job continues from a checkpoint, so
        output committed before it must be kept (no 'replace' of earlier output)."""

    def recover(self, handles: list[Any], checkpoint_id: int | None = None) -> None:
        """Before a resumed job writes: publish the restored checkpoint's
        pre-committed output (``handles`` of every subtask; commit is idempotent)
        and discard staged output that no completed checkpoint covers.
        Called once per sink, on a fresh instance."""
        for handle in handles:
            self.commit(-1 if checkpoint_id is None else checkpoint_id, handle)

    def withdraw(self, job: str, after: int, *, fresh: bool = False) -> str | None:
        """Before a job restored from checkpoint ``after`` (0: started afresh) writes: take back
        what ``job`` published for later checkpoints, as its commit log records, so that
        replaying publishes it once; or raise EngineError (naming the sink, the checkpoints and
        the fix) where that output cannot be taken back. ``fresh``: the user asked to start
        over (--fresh). Returns what was withdrawn, for a warning, or None."""
        return None

    @abstractmethod
    def write(self, batch: pa.RecordBatch) -> None:
        """Stage a batch (it conforms to ``self.schema``)."""

    def pre_commit(self, checkpoint_id: int) -> Any:
        """Make staged output durable but invisible; return what commit needs."""
        return None

    def commit(self, checkpoint_id: int, handle: Any = None) -> None:
        """Make the output of checkpoint ``checkpoint_id`` visible."""

    def abort(self) -> None:
        """Discard output staged since the last pre-commit. Pre-committed output stays:
        it may belong to a completed checkpoint; ``recover`` publishes or deletes it."""

    def finish(self) -> None:
        """End of job without checkpointing: commit everything staged."""

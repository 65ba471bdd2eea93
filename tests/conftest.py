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

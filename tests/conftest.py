"""Fixtures shared by test files in different folders, and the bytecode cache of the
processes the tests start."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

import s3_server


def pytest_configure(config):
    """With PYTHONDONTWRITEBYTECODE set, every ``python -m weir.shell.cli`` a test starts (a
    killed golden run starts 3, a parallel job spawns a process per worker) would compile
    each weir module from source again, about 0.5 s of CPU per process. Instead they share
    compiled modules kept outside the checkout (PYTHONPYCACHEPREFIX, which the xdist workers
    and every process they start inherit); Python checks each against its source's mtime and
    size, so an edited module is compiled again. An installed weir has its modules compiled
    once, at install, so this is how it starts for a user too."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / f"weir-tests-pycache-{os.getuid()}")
        del os.environ["PYTHONDONTWRITEBYTECODE"]


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

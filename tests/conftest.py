"""Fixtures shared by test files in different folders, and the bytecode cache of the
processes the tests start."""
from __future__ import annotations

import os
import signal
import tempfile
import threading
import warnings
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


@pytest.fixture(autouse=True)
def sigint_as_a_terminal_gives_it(request):
    """Each test starts with SIGINT as a terminal's command has it: Python's handler, unblocked.
    Every process a test starts inherits this process's SIGINT disposition and signal mask, and
    a command that inherits SIGINT ignored or blocked never sees Ctrl-C (as a background job of
    sh does not): `weir serve`, `weir run --serve` after its job and the shell's live result then
    wait for ever for the Ctrl-C a test sends (seen in CI, in both xdist workers, after this
    session's regrouping of the golden tests; which earlier test left it so was not found). A
    test that leaves it so is named in a warning and the state is put back for the next one."""
    _put_sigint_back(f"before {request.node.nodeid}")
    yield
    _put_sigint_back(f"{request.node.nodeid}")


def _put_sigint_back(when: str) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set a handler
    handler = signal.getsignal(signal.SIGINT)
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    if handler is signal.SIG_IGN or blocked:
        warnings.warn(f"SIGINT was {'blocked' if blocked else 'ignored'} in the test process {when}; put back")
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

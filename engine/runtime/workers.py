"""Where a parallel job's worker processes come from: a fork server with the engine loaded.

A worker is forked from ``multiprocessing``'s fork server, which imported the engine once
(``PRELOAD``), so that it starts in milliseconds instead of importing pyarrow, DuckDB and the
engine again (~0.7 s of CPU each, spawned). The server serves every parallel job of this
process. The first such job starts it, or earlier a command that knows one is coming (`weir run`
of a parallel job starts it before it imports the planner, so that both import at once, on two
cores), and every parallel job makes sure it runs. A server keeps the environment it started
with: a worker adopts the coordinator's own when it starts (``parallel._worker``).

This module imports nothing heavy: the command line calls it before it loads anything else.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.context
import signal

#: What the fork server imports, once: the runtime and every operator (``worker_preload``).
PRELOAD = ["weir.engine.runtime.worker_preload"]


def worker_context() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def start_fork_server() -> None:
    """Start the fork server now, unless it runs; it imports the engine in the background while
    this process goes on. SIGINT is blocked meanwhile, so the server and every worker forked from it start
    with it blocked, as a worker must until it ignores it (``parallel._worker``)."""
    from multiprocessing import forkserver, resource_tracker

    worker_context()
    # The server starts the resource tracker first, if it is not running: starting it unblocks
    # SIGINT in the calling thread, so it is started before SIGINT is blocked.
    resource_tracker.ensure_running()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

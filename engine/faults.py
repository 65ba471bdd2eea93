"""Fault injection for the crash tests: die, fail or stall at a named point.

``WEIR_FAULT=<point>:<n>[:raise|:stall][@<subtask>]`` kills this process with
SIGKILL (or, with ``:raise``, raises InjectedFault) the n-th time the job
reaches ``point``. With ``@<subtask>`` only worker ``subtask`` of a parallel job
counts (its coordinator and the other workers never fire), so that a test can
name the worker that dies. ``:stall`` makes ``reach`` return True instead: the
caller stalls in its own way (a worker's sources hold checkpoint n's barrier,
a checkpoint's writer waits until the checkpoint is aborted; at ``batch`` a
parallel job's worker reads no more source batches in this run, while it goes
on taking part in checkpoints, so that the job cannot end before a test's
fault elsewhere lands). With
``WEIR_FAULT_ONCE=<file>`` the fault fires at most once across every process
and restart: the first to fire creates the file.

Points: ``batch`` (after a source batch is processed), ``snapshot-write``
(while a snapshot is being written), ``before-metadata``, ``after-metadata``
(checkpoint durable, output not yet committed), ``commit`` (between two
sinks' commits), ``restore`` (a subtask restoring state from a checkpoint),
``align`` (a worker's task received barrier n on some of its channels, not yet
all), ``inject`` (a worker is about to inject barrier n at its sources),
``publish`` (a results database's next snapshot is written, not yet renamed
over the published file), ``published`` (renamed, its staged files not yet
deleted), ``shutdown`` (a worker committed its final output and has not yet reported
its end) and ``output-committed`` (the final checkpoint's output is committed
and marked so; the process has not exited yet). Unset, ``reach`` costs one
dictionary lookup.
"""
from __future__ import annotations

import os
import signal
import threading

from weir.engine.errors import EngineError


class InjectedFault(EngineError):
    """A failure injected by WEIR_FAULT, handled like any failure of the job."""


def _parse(spec: str | None) -> tuple[tuple[str, int, object] | None, int | None]:
    """(point, n, mode) and the only subtask that counts (None: any process)."""
    if not spec:
        return None, None
    spec, _, subtask = spec.partition("@")
    parts = spec.split(":")
    mode = parts[2] if len(parts) > 2 and parts[2] in ("raise", "stall") else False
    return (parts[0], int(parts[1]) if len(parts) > 1 else 1, mode), int(subtask) if subtask else None


_FAULT: tuple[str, int, object] | None = None
_ONLY_SUBTASK: int | None = None
_ONCE: str | None = None
_counts: dict[str, int] = {}
_lock = threading.Lock()
#: This process's subtask, in a worker of a parallel job (``set_subtask``).
_subtask: int | None = None


def configure() -> None:
    """Read WEIR_FAULT and WEIR_FAULT_ONCE again, counting from zero: a worker forked from a
    process that read them before the job's were set (``engine.runtime.parallel``)."""
    global _FAULT, _ONLY_SUBTASK, _ONCE
    _FAULT, _ONLY_SUBTASK = _parse(os.environ.get("WEIR_FAULT"))
    _ONCE = os.environ.get("WEIR_FAULT_ONCE")
    _counts.clear()


configure()


def set_subtask(subtask: int) -> None:
    """This process runs worker ``subtask`` of a parallel job (for ``@<subtask>`` faults)."""
    global _subtask
    _subtask = subtask


def _first_to_fire() -> bool:
    if _ONCE is None:
        return True
    try:
        os.close(os.open(_ONCE, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def reach(point: str) -> bool:
    """Count a pass through ``point``; kill, raise, or (``:stall``) return True when the fault hits."""
    if _FAULT is None or _FAULT[0] != point:
        return False
    if _ONLY_SUBTASK is not None and _subtask != _ONLY_SUBTASK:
        return False
    with _lock:
        _counts[point] = _counts.get(point, 0) + 1
        hit = _counts[point] == _FAULT[1]
    if not hit or not _first_to_fire():
        return False
    mode = _FAULT[2]
    if mode == "stall":
        return True
    if mode:  # ':raise' (or True, set by a test)
        raise InjectedFault(f"injected fault at {point} #{_FAULT[1]}",
                            hint="unset WEIR_FAULT: it is for the crash tests")
    os.kill(os.getpid(), signal.SIGKILL)
    return False

"""Fault injection for the crash tests: die or fail at a named point.

``WEIR_FAULT=<point>:<n>[:raise]`` kills this process with SIGKILL (or, with
``:raise``, raises InjectedFault) the n-th time the job reaches ``point``.
Points: ``batch`` (after a source batch is processed), ``snapshot-write``
(while a snapshot is being written), ``before-metadata``, ``after-metadata``
(checkpoint durable, output not yet committed), ``commit`` (between two
sinks' commits), ``restore`` (a subtask restoring state from a checkpoint)
and ``output-committed`` (the final checkpoint's output is committed and
marked so; the process has not exited yet). Unset, ``reach`` costs one
dictionary lookup.
"""
from __future__ import annotations

import os
import signal
import threading

from weir.engine.errors import EngineError


class InjectedFault(EngineError):
    """A failure injected by WEIR_FAULT, handled like any failure of the job."""


def _parse(spec: str | None) -> tuple[str, int, bool] | None:
    if not spec:
        return None
    parts = spec.split(":")
    return parts[0], int(parts[1]) if len(parts) > 1 else 1, len(parts) > 2 and parts[2] == "raise"


_FAULT = _parse(os.environ.get("WEIR_FAULT"))
_counts: dict[str, int] = {}
_lock = threading.Lock()


def reach(point: str) -> None:
    if _FAULT is None or _FAULT[0] != point:
        return
    with _lock:
        _counts[point] = _counts.get(point, 0) + 1
        hit = _counts[point] == _FAULT[1]
    if hit:
        if _FAULT[2]:
            raise InjectedFault(f"injected fault at {point} #{_FAULT[1]}",
                                hint="unset WEIR_FAULT: it is for the crash tests")
        os.kill(os.getpid(), signal.SIGKILL)

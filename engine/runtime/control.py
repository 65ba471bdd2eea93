"""Asking a running job, from another process, for a savepoint or a stop.

The channel is a folder in the job's state directory: no server needed, and
it works for any process on the machine. A client writes ``<id>.request``
(JSON, written whole by rename); the job looks at batch boundaries, at most
every ``poll_interval`` seconds, takes the request, acts, and writes
``<id>.response``. While the job runs, ``job.json`` names its process.

A run holds its state directory with an OS file lock (``lock_state_dir``:
``flock`` on ``<state dir>/job.lock``) for as long as it runs, so a second
run of the same job on the same directory is refused at once, naming the
running process, before it reads, deletes or writes anything there. The
kernel drops the lock when the process ends, however it ends: a killed run
never leaves a stale lock behind.
"""
from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weir.engine.checkpoint.location import location_text, parse_location
from weir.engine.errors import EngineError


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


LOCK_FILE = "job.lock"


@dataclass
class StateDirLock:
    """The lock a run holds on its state directory; ``release`` (or the process's end) frees it."""

    path: Path
    fd: int | None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the file stays: unlinking it would let two runs lock two files
            self.fd = None


def lock_state_dir(state_dir: Path) -> StateDirLock:
    """Lock ``state_dir`` for this process, or fail at once naming the process that holds it."""
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError: another run holds it
        holder = _lock_holder(fd, state_dir)
        os.close(fd)
        raise EngineError(
            f"the state directory {state_dir} is in use by another run of this job"
            + (f" (process {holder})" if holder else ""),
            hint="wait for that run to end or stop it (`weir stop --savepoint`), "
                 "or give this run a state directory of its own (--state-dir)",
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return StateDirLock(path, fd)


def _lock_holder(fd: int, state_dir: Path) -> int | None:
    """The pid the lock file names (written by its holder), else the one in ``control/job.json``."""
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return running_pid(state_dir / "control")


#: A request to take a checkpoint (not a savepoint), commit its output and stop: what Ctrl-C or
#: SIGTERM to `weir run` asks for. The job's next run resumes from that checkpoint.
STOP_AT_CHECKPOINT = "stop-at-checkpoint"


@dataclass
class Request:
    id: str
    kind: str  # 'savepoint', 'stop' (stop with a savepoint) or STOP_AT_CHECKPOINT
    path: str | None  # where the savepoint goes: a directory or a URI
    directory: Path = field(repr=False)

    def reply(self, **fields: Any) -> None:
        _write_atomically(self.directory / f"{self.id}.response", fields)


class ControlChannel:
    """The job's side."""

    def __init__(self, directory: Path, *, poll_interval: float = 0.1):
        self.directory = Path(directory)
        self.poll_interval = poll_interval
        self._next_poll = 0.0

    def open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_atomically(self.directory / "job.json", {"pid": os.getpid(), "started": time.time()})

    def close(self) -> None:
        (self.directory / "job.json").unlink(missing_ok=True)

    def poll(self, *, throttled: bool = True) -> list[Request]:
        """The requests written since the last look, taken. ``throttled``: none when the last
        look was less than ``poll_interval`` ago (a job looks at every batch boundary)."""
        now = time.monotonic()
        if throttled and now < self._next_poll:
            return []
        self._next_poll = now + self.poll_interval
        requests = []
        for entry in sorted(self.directory.glob("*.request")):
            try:
                data = json.loads(entry.read_text())
            finally:
                entry.unlink(missing_ok=True)
            path = data["path"] or None  # a directory or a URI (checkpoint.location)
            requests.append(Request(entry.stem, data.get("kind", ""), path, self.directory))
        return requests


def running_pid(directory: Path) -> int | None:
    """The process id of the job running with this control folder, if one is."""
    try:
        pid = int(json.loads((Path(directory) / "job.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid


def send(directory: Path, kind: str, path: "Path | str | None" = None, *, timeout: float = 300.0) -> dict[str, Any]:
    """The client's side: ask the running job and wait for its answer."""
    directory = Path(directory)
    if running_pid(directory) is None:
        raise EngineError(f"no job is running with the control folder {directory}",
                          hint="start it with `weir run`, or pass the --state-dir it runs with")
    request_id = uuid.uuid4().hex[:12]
    _write_atomically(directory / f"{request_id}.request",
                      {"kind": kind, "path": location_text(parse_location(path)) if path else None})
    response = directory / f"{request_id}.response"
    deadline = time.monotonic() + timeout
    while not response.exists():
        if running_pid(directory) is None:
            raise EngineError("the job ended before answering", hint="see the job's own output")
        if time.monotonic() > deadline:
            (directory / f"{request_id}.request").unlink(missing_ok=True)
            raise EngineError(f"the job did not answer within {timeout:.0f} s",
                              hint="it answers between batches; is it stuck on a slow source?")
        time.sleep(0.05)
    answer = json.loads(response.read_text())
    response.unlink(missing_ok=True)
    return answer

"""Asking a running job, from another process, for a savepoint or a stop.

The channel is a folder in the job's state directory: no server needed, and
it works for any process on the machine. A client writes ``<id>.request``
(JSON, written whole by rename); the job looks at batch boundaries, at most
every ``poll_interval`` seconds, takes the request, acts, and writes
``<id>.response``. While the job runs, ``job.json`` names its process.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import EngineError


def _write_atomically(path: Path, data: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


@dataclass
class Request:
    id: str
    kind: str  # 'savepoint' or 'stop' (stop with a savepoint)
    path: Path | None
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

    def poll(self) -> list[Request]:
        now = time.monotonic()
        if now < self._next_poll:
            return []
        self._next_poll = now + self.poll_interval
        requests = []
        for entry in sorted(self.directory.glob("*.request")):
            try:
                data = json.loads(entry.read_text())
            finally:
                entry.unlink(missing_ok=True)
            path = Path(data["path"]) if data.get("path") else None
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


def send(directory: Path, kind: str, path: Path | None = None, *, timeout: float = 300.0) -> dict[str, Any]:
    """The client's side: ask the running job and wait for its answer."""
    directory = Path(directory)
    if running_pid(directory) is None:
        raise EngineError(f"no job is running with the control folder {directory}",
                          hint="start it with `weir run`, or pass the --state-dir it runs with")
    request_id = uuid.uuid4().hex[:12]
    _write_atomically(directory / f"{request_id}.request",
                      {"kind": kind, "path": str(path.resolve()) if path else None})
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

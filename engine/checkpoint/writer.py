"""Writing one checkpoint or savepoint: state files first, ``_metadata`` last.

1. ``write_state`` is called once per operator subtask, from any thread, while the
   job goes on: the snapshot's tables become Parquet files, the rest JSON, each
   fsynced with its folder (``state_files``). It returns the subtask's handle.
2. ``commit`` fsyncs the folders that name those files, then writes ``_metadata``
   atomically (temporary file, fsync, rename, fsync the directory). From that
   rename on, and only from then, the checkpoint exists.
3. ``abort`` removes what was written; a crash before ``commit`` leaves a
   directory without ``_metadata``, which readers ignore and
   ``CheckpointStorage.discard_incomplete`` removes.

On a remote filesystem (an object store) the fsyncs are nothing and ``_metadata`` is one
upload, the last: the same rule without a rename (``files.write_atomically``).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

from weir.engine.checkpoint.errors import CheckpointError
from weir.engine.checkpoint.files import children, fsync_directory, remove_directory, remove_file, write_atomically
from weir.engine.checkpoint.location import Location
from weir.engine.checkpoint.metadata import (
    METADATA_FILE,
    CheckpointInfo,
    decode_metadata,
    encode_metadata,
    info_of,
    now,
)
from weir.engine.checkpoint.state_files import safe_name, write_subtask_state


class CheckpointWriter:
    def __init__(
        self,
        checkpoint_id: int,
        kind: str,
        path: Location,
        *,
        on_commit: Callable[[CheckpointInfo], None] | None = None,
        created_directory: bool = True,
        parents: Sequence[Location] = (),
    ):
        self.checkpoint_id = checkpoint_id
        self.kind = kind
        self.path = path
        self._on_commit = on_commit
        self._created_directory = created_directory
        #: Directories whose entries name directories created for this writer.
        self._parents = list(parents)
        self._lock = threading.Lock()
        self._handles: dict[str, dict[str, Any]] = {}
        self._writing: set[tuple[str, int]] = set()
        self._status = "open"

    @property
    def name(self) -> str:
        return f"{self.kind} {self.checkpoint_id} at {self.path}"

    def _check_open(self, action: str) -> None:
        if self._status != "open":
            raise CheckpointError(f"cannot {action}: {self.name} was already {self._status}")

    # -- 1. state ----------------------------------------------------------
    def write_state(self, operator_id: str, subtask: int, state: Any) -> dict[str, Any]:
        """Write one subtask's snapshot durably; return its JSON-able handle. Thread-safe."""
        if not isinstance(subtask, int) or subtask < 0:
            raise ValueError(f"subtask must be a non-negative int, not {subtask!r}")
        key = (operator_id, subtask)
        with self._lock:
            self._check_open(f"write the state of {operator_id} subtask {subtask}")
            if key in self._writing or str(subtask) in self._handles.get(operator_id, {}):
                raise CheckpointError(
                    f"the state of subtask {subtask} was written twice to {self.name}",
                    operator_id=operator_id,
                )
            self._writing.add(key)
        try:
            handle = write_subtask_state(self.path, operator_id, subtask, state)
        except OSError as e:
            raise CheckpointError(
                f"cannot write the state of subtask {subtask} to {self.name}: {e}",
                hint="check free space and permissions of the checkpoint directory",
                operator_id=operator_id,
                path=self.path,
            ) from e
        finally:
            with self._lock:
                self._writing.discard(key)
        with self._lock:
            self._handles.setdefault(operator_id, {})[str(subtask)] = handle
        return handle

    # -- 2. commit ---------------------------------------------------------
    def commit(self, metadata: dict[str, Any]) -> CheckpointInfo:
        """Write ``_metadata`` last and atomically; the checkpoint exists from then on.

        ``metadata`` (JSON-able: source offsets, sink handles, the graph's fingerprint)
        is stored as given and comes back as ``Checkpoint.metadata``."""
        with self._lock:
            self._check_open("commit")
            if self._writing:
                pending = ", ".join(f"{op} subtask {s}" for op, s in sorted(self._writing))
                raise CheckpointError(f"cannot commit {self.name}: still writing the state of {pending}")
            self._status = "committing"
        try:
            data = encode_metadata(
                checkpoint_id=self.checkpoint_id,
                kind=self.kind,
                operators=self._handles,
                metadata=metadata,
                created_at=now(),
            )
        except (TypeError, ValueError) as e:
            self._status = "open"
            raise CheckpointError(f"the metadata of {self.name} is not JSON-able: {e}") from e
        try:
            for operator_id in self._handles:
                fsync_directory(self.path / safe_name(operator_id))
            fsync_directory(self.path)
            for parent in dict.fromkeys([*self._parents, self.path.parent]):
                fsync_directory(parent)
            write_atomically(self.path / METADATA_FILE, data)
        except OSError as e:
            self._status = "open"
            raise CheckpointError(
                f"cannot write the metadata of {self.name}: {e}", path=self.path,
                hint="check free space and permissions of the checkpoint directory",
            ) from e
        self._status = "committed"
        info = info_of(decode_metadata(data), self.path)
        if self._on_commit is not None:
            self._on_commit(info)
        return info

    # -- 3. abort ----------------------------------------------------------
    def abort(self) -> None:
        """Remove everything this writer wrote. Does nothing after ``commit``."""
        with self._lock:
            if self._status in ("committed", "aborted"):
                return
            self._status = "aborted"
        if self._created_directory:
            remove_directory(self.path)
        else:  # a user-chosen savepoint folder that existed: empty it again
            for child, directory in children(self.path):
                if directory:
                    remove_directory(child)
                else:
                    remove_file(child)

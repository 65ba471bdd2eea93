"""Checkpoint storage: where checkpoints and savepoints live, which ones count, and
how many are kept.

Layout (``directory`` is e.g. ``.weir/<job>/checkpoints``)::

    <directory>/chk-<id>/_metadata               written last: the checkpoint exists iff it does
    <directory>/chk-<id>/<operator>/subtask-<n>/state.json
    <directory>/chk-<id>/<operator>/subtask-<n>/<table>.parquet
    <directory>/../savepoints/sp-<id>/...        savepoints, same layout (or a path the user chose)
    <directory>/_staged/<uuid>.parquet           state tables workers of other nodes uploaded (staging.py)

A directory without ``_metadata`` is a checkpoint that never completed (aborted or
cut short by a crash); readers ignore it and ``discard_incomplete`` removes it.
``latest`` verifies before it trusts: a checkpoint whose files are missing,
truncated or fail their checksum is skipped with a warning, and the one before it
is used. After each commit only the newest ``retained`` checkpoints are kept;
savepoints belong to the user and are never removed.

The formats are described in ``metadata.py`` (``_metadata``) and
``state_files.py`` (a subtask's files and its handle).

``directory`` is a location (``location.py``): a local directory, or a URI of any
filesystem ``pyarrow.fs`` opens (``file://``, ``s3://``, ...), with the same layout and the
same rule. On an object store, where nothing is renamed or fsynced, ``_metadata`` is one
object written by one upload after every state file is: it exists iff the checkpoint is
complete, as on a disk.
"""
from __future__ import annotations

import logging
import re
from typing import Callable

from weir.engine.checkpoint.errors import CheckpointError
from weir.engine.checkpoint.files import (
    children,
    exists,
    fsync_directory,
    is_dir,
    make_directories,
    read_bytes,
    remove_directory,
    remove_file,
)
from weir.engine.checkpoint.location import Location, parse_location
from weir.engine.checkpoint.staging import STAGED_FOLDER
from weir.engine.checkpoint.metadata import (
    KINDS,
    METADATA_FILE,
    CheckpointInfo,
    MetadataProblem,
    decode_metadata,
    info_of,
)
from weir.engine.checkpoint.reader import Checkpoint
from weir.engine.checkpoint.writer import CheckpointWriter

__all__ = ["Checkpoint", "CheckpointError", "CheckpointInfo", "CheckpointStorage", "CheckpointWriter"]

CHECKPOINT_PREFIX = "chk-"
SAVEPOINT_PREFIX = "sp-"
_CHECKPOINT_NAME = re.compile(r"chk-(\d+)")
_log = logging.getLogger("weir.checkpoint")


def _log_warning(message: str) -> None:
    _log.warning("%s", message)


class CheckpointStorage:
    def __init__(self, directory: "Location | str", *, retained: int = 3):
        if retained < 1:
            raise ValueError(f"retained must be at least 1, not {retained}")
        self.directory = parse_location(directory)
        self.retained = retained

    @property
    def savepoint_directory(self) -> Location:
        """Where savepoints go when the user names no path: next to ``directory``."""
        return self.directory.parent / "savepoints"

    def checkpoint_path(self, checkpoint_id: int) -> Location:
        return self.directory / f"{CHECKPOINT_PREFIX}{checkpoint_id}"

    # -- writing -------------------------------------------------------------
    def writer(self, checkpoint_id: int, *, kind: str = "checkpoint",
               path: "Location | str | None" = None) -> CheckpointWriter:
        """A writer for checkpoint ``checkpoint_id``: ``directory/chk-<id>/``, or for a
        savepoint: ``path`` if given, else ``directory/../savepoints/sp-<id>/``."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
        if kind == "checkpoint":
            if path is not None:
                raise ValueError("a checkpoint's path is chosen by the storage; only a savepoint takes one")
            return self._checkpoint_writer(checkpoint_id)
        return self._savepoint_writer(checkpoint_id, parse_location(path) if path is not None else None)

    def _checkpoint_writer(self, checkpoint_id: int) -> CheckpointWriter:
        target = self.checkpoint_path(checkpoint_id)
        if exists(target / METADATA_FILE):
            raise CheckpointError(
                f"checkpoint {checkpoint_id} at {target} already exists",
                hint="checkpoint ids must grow; continue after the latest completed checkpoint",
                path=target,
            )
        remove_directory(target)  # left by an attempt that never completed
        return CheckpointWriter(
            checkpoint_id, "checkpoint", target, on_commit=self._retain, parents=make_directories(target)
        )

    def _savepoint_writer(self, checkpoint_id: int, path: Location | None) -> CheckpointWriter:
        target = path if path is not None else self.savepoint_directory / f"{SAVEPOINT_PREFIX}{checkpoint_id}"
        existed = exists(target)
        if existed and (not is_dir(target) or children(target)):
            raise CheckpointError(
                f"cannot write savepoint {checkpoint_id} to {target}: it exists and is not an empty directory",
                hint="choose another savepoint path, or remove the old savepoint first",
                path=target,
            )
        return CheckpointWriter(
            checkpoint_id, "savepoint", target, created_directory=not existed, parents=make_directories(target)
        )

    def _retain(self, committed: CheckpointInfo) -> None:
        """Keep the newest ``retained`` completed checkpoints; remove the rest.

        ``_metadata`` goes first, so that a crash midway leaves an incomplete
        directory, never a completed checkpoint with files missing."""
        completed = [(cid, path) for cid, path in self._checkpoint_directories() if exists(path / METADATA_FILE)]
        for checkpoint_id, path in completed[self.retained:]:
            if checkpoint_id == committed.id:
                continue
            try:
                remove_file(path / METADATA_FILE)
                fsync_directory(path)
                remove_directory(path)
            except OSError as e:  # the commit stands; an old checkpoint outlives its time
                _log_warning(f"could not remove old checkpoint {checkpoint_id} at {path}: {e}")

    # -- reading -------------------------------------------------------------
    def _checkpoint_directories(self) -> list[tuple[int, Location]]:
        """``(id, path)`` of every ``chk-<id>`` directory, newest first."""
        found = []
        for child, directory in children(self.directory):
            match = _CHECKPOINT_NAME.fullmatch(child.name)
            if match and directory:
                found.append((int(match.group(1)), child))
        return sorted(found, reverse=True)

    def directory_ids(self) -> list[int]:
        """The id of every ``chk-<id>`` directory, complete, incomplete or corrupt, newest first."""
        return [checkpoint_id for checkpoint_id, _ in self._checkpoint_directories()]

    def completed(self) -> list[CheckpointInfo]:
        """Checkpoints whose ``_metadata`` exists and parses, newest first (files not verified)."""
        infos = []
        for _, path in self._checkpoint_directories():
            try:
                infos.append(info_of(decode_metadata(read_bytes(path / METADATA_FILE)), path))
            except (OSError, MetadataProblem):
                continue
        return infos

    def latest(self, warn: Callable[[str], None] = _log_warning) -> Checkpoint | None:
        """The newest completed checkpoint whose files verify, or None if none completed.

        A corrupt one (a file missing, truncated or failing its checksum; unreadable
        ``_metadata``) is skipped with ``warn("<which>: <why>")`` and the one before is
        tried. If checkpoints completed but none verifies, this raises rather than let
        the job start over from nothing."""
        skipped: list[str] = []
        for checkpoint_id, path in self._checkpoint_directories():
            if not exists(path / METADATA_FILE):
                continue
            try:
                checkpoint = Checkpoint.load(path, f"checkpoint {checkpoint_id}")
                if checkpoint.id != checkpoint_id or checkpoint.kind != "checkpoint":
                    raise CheckpointError(
                        f"checkpoint {checkpoint_id} at {path} is corrupt: its _metadata describes "
                        f"{checkpoint.kind} {checkpoint.id}"
                    )
                return checkpoint
            except CheckpointError as e:
                skipped.append(e.message)
                warn(f"{e.message}; skipped, trying the checkpoint before it")
        if skipped:
            raise CheckpointError(
                f"no checkpoint in {self.directory} can be restored: {'; '.join(skipped)}",
                hint="resume from a savepoint, or delete the checkpoint directory to start the job over",
                path=self.directory,
            )
        return None

    @staticmethod
    def open(path: "Location | str") -> Checkpoint:
        """The checkpoint or savepoint directory ``path`` (or its ``_metadata``), verified.
        Raises ``CheckpointError`` saying what is wrong if it is incomplete or corrupt."""
        return Checkpoint.load(parse_location(path))

    def discard_incomplete(self) -> None:
        """Remove ``chk-*`` directories without ``_metadata`` (aborted, or left by a crash), and
        the staging area of workers' uploaded state tables (``staging.py``).
        Call it when no writer is running: an unfinished checkpoint looks the same."""
        for _, path in self._checkpoint_directories():
            if not exists(path / METADATA_FILE):
                remove_directory(path)
        remove_directory(self.directory / STAGED_FOLDER)  # staged tables no checkpoint took

"""Staged state tables that reach the checkpoint from any node.

A large state table is staged at snapshot time into a Parquet file under its worker's spill
directory (``engine.state.staged``). On one machine the driver's checkpoint writer moves that
file into the checkpoint. A worker on another machine (a Ray actor) stages onto its own node's
disk, which the driver cannot see: such a worker uploads each staged file itself, before it
sends its snapshot, into the staging area of the checkpoint storage every node reaches::

    <checkpoints>/_staged/<uuid>.parquet

and sends a ``StagedTable`` whose path is that location (its URI text, or an absolute path on a
shared directory), with the file's SHA-256 and size computed as it was uploaded. The driver's
writer then moves it within that filesystem into ``chk-<id>/<operator>/subtask-<n>/`` (a rename
on a shared directory; a server-side copy and delete on an object store: ``move_staged``).

The staging area is shared by the checkpoints, not inside ``chk-<id>``: a worker does not know
the id of the final checkpoint nor where a savepoint goes when it snapshots, and a checkpoint's
writer clears ``chk-<id>`` before it writes. What no checkpoint takes is deleted: the files of a
snapshot the driver drops (an aborted checkpoint) or fails to write (``discard_staged``), and
whatever a failed run left (``CheckpointStorage.discard_incomplete``, before every restore).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from weir.engine.checkpoint.files import exists, file_size, make_directories, remove_file
from weir.engine.checkpoint.location import Location, RemotePath, is_uri, location_text, parse_location
from weir.engine.state.staged import StagedTable

#: The staging area's folder inside a checkpoint directory (not a ``chk-<id>``: no reader lists it).
STAGED_FOLDER = "_staged"
_CHUNK = 1 << 20


def staged_location(table: StagedTable) -> Location:
    """Where a staged table's file is: a local path, or a place on a remote filesystem."""
    return parse_location(table.path) if is_uri(table.path) else Path(table.path)


def upload_staged(snapshots: dict[str, Any], checkpoints: "Location | str") -> dict[str, Any]:
    """``snapshots`` (operator id -> state) with every staged table uploaded into the staging
    area of ``checkpoints`` and its local file deleted; other tables are left as they are."""
    area = parse_location(checkpoints) / STAGED_FOLDER
    uploaded = {}
    for operator_id, state in snapshots.items():
        tables = state.get("tables") if isinstance(state, dict) else None
        if not isinstance(tables, dict) or not any(isinstance(t, StagedTable) for t in tables.values()):
            uploaded[operator_id] = state
            continue
        make_directories(area)
        tables = {name: _upload(table, area) if isinstance(table, StagedTable) else table
                  for name, table in tables.items()}
        uploaded[operator_id] = {**state, "tables": tables}
    return uploaded


def _upload(table: StagedTable, area: Location) -> StagedTable:
    source = Path(table.path)
    target = area / f"{uuid.uuid4().hex}.parquet"
    h, size = hashlib.sha256(), 0
    if isinstance(target, RemotePath):  # one upload: the object is visible whole once it completes
        with open(source, "rb") as f, target.filesystem.open_output_stream(target.path) as out:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
    else:  # a shared directory: the file is fsynced before anyone is told of it
        with open(source, "rb") as f, open(target, "xb") as out:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
    source.unlink()
    return StagedTable(location_text(target), table.rows, table.key_groups, h.hexdigest(), size)


def move_staged(root: Location, relative: str, table: StagedTable) -> dict[str, Any]:
    """Move an uploaded staged file into the checkpoint at ``root/relative``; return its file
    entry (the SHA-256 and size the worker computed, the size checked after the move).
    Within one filesystem it is that filesystem's move; from another, a copy and a delete."""
    source, target = staged_location(table), root / relative
    if exists(target):
        raise FileExistsError(f"{target} exists already")
    if isinstance(source, RemotePath) or isinstance(target, RemotePath):
        source_fs, source_path = _on_filesystem(source)
        target_fs, target_path = _on_filesystem(target)
        if _same_filesystem(source, target):
            target_fs.move(source_path, target_path)
        else:
            pafs.copy_files(source_path, target_path, source_filesystem=source_fs, destination_filesystem=target_fs)
            source_fs.delete_file(source_path)
    else:
        try:
            os.replace(source, target)
        except OSError:  # another file system (a savepoint elsewhere): a copy, fsynced
            shutil.copyfile(source, target)
            with open(target, "rb+") as f:
                os.fsync(f.fileno())
            source.unlink()
    size = file_size(target)
    if size != table.bytes:
        raise OSError(f"the staged file moved to {target} is {size} bytes, not the {table.bytes} uploaded")
    return {"path": relative, "sha256": table.sha256, "bytes": size}


def _on_filesystem(path: Location) -> tuple[pafs.FileSystem, str]:
    if isinstance(path, RemotePath):
        return path.filesystem, path.path
    return pafs.LocalFileSystem(), str(Path(path).resolve())


def _same_filesystem(a: Location, b: Location) -> bool:
    """Whether one filesystem's move goes from ``a`` to ``b`` (same scheme and host or bucket's
    filesystem options: the part of the URI before the path)."""
    if not (isinstance(a, RemotePath) and isinstance(b, RemotePath)):
        return False
    if a.filesystem.type_name != b.filesystem.type_name:
        return False
    query = lambda p: p.uri.partition("?")[2]  # noqa: E731 (the filesystem's options)
    return query(a) == query(b) and (a.filesystem.type_name == "s3" or a.uri.split("/")[2] == b.uri.split("/")[2])


def discard_staged(snapshots: dict[str, Any]) -> None:
    """Delete the files of the staged tables in ``snapshots`` (operator id -> subtask -> state, or
    operator id -> state) that no checkpoint will take. Best effort: what is left is removed with
    the staging area before the next restore."""
    for value in snapshots.values():
        states = value.values() if isinstance(value, dict) and "tables" not in value else [value]
        for state in states:
            tables = state.get("tables") if isinstance(state, dict) else None
            for table in (tables or {}).values() if isinstance(tables, dict) else ():
                if isinstance(table, StagedTable):
                    try:
                        remove_file(staged_location(table))
                    except OSError:
                        pass

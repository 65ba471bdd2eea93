"""Files that survive a crash, and the checks that prove a file is the one that was written.

A file is written whole, flushed and fsynced before anyone records it; a directory
is fsynced so that the names in it survive too. Presence proves nothing (see
``shared/reference/measured-here.md``): a reader checks every file against the
size and SHA-256 recorded for it, and learns of a file only from metadata that
was written last (``write_atomically``).

A file entry is JSON-able: ``{"path": relative POSIX path, "sha256": hex, "bytes": n}``.

Every function takes a location (``location.py``): a local ``Path``, written with ``os``
calls and fsynced as above, or a ``RemotePath`` on another filesystem, used through
``pyarrow.fs``. An object store has no rename and no fsync: there a file is one object,
written whole by one upload that becomes visible only when it completes, so "written
whole, or not at all" holds without a temporary name, and directories are only prefixes
(``fsync_directory`` does nothing, ``make_directories`` creates what the filesystem needs).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

import pyarrow.fs as pafs

from weir.engine.checkpoint.location import Location, RemotePath

_CHUNK = 1 << 20


class FileProblem(Exception):
    """Why a recorded file cannot be trusted: missing, wrong size, wrong checksum."""


def fsync_directory(path: Location) -> None:
    if isinstance(path, RemotePath):
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(path: Location) -> list[Location]:
    """Create ``path`` and its missing parents; return the directories whose entries must
    be fsynced for them to survive a crash (the parent of each one created)."""
    if isinstance(path, RemotePath):
        path.filesystem.create_dir(path.path, recursive=True)
        return []
    missing = []
    ancestor = path
    while not ancestor.exists():
        missing.append(ancestor)
        ancestor = ancestor.parent
    path.mkdir(parents=True, exist_ok=True)
    return [created.parent for created in reversed(missing)]


def write_file(root: Location, relative: str, data: Any) -> dict[str, Any]:
    """Write ``data`` (bytes or any buffer) to a new file ``root/relative`` and fsync it.

    Returns its entry. The caller fsyncs the directory once all its files are written.
    """
    target = root / relative
    if isinstance(target, RemotePath):
        if exists(target):
            raise FileExistsError(f"{target} exists already")
        with target.filesystem.open_output_stream(target.path) as out:
            out.write(data)
    else:
        with open(target, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    view = memoryview(data)
    return {"path": relative, "sha256": hashlib.sha256(view).hexdigest(), "bytes": view.nbytes}


def move_file(root: Location, relative: str, source: Path) -> dict[str, Any]:
    """Move the finished local file ``source`` to the new file ``root/relative`` (a rename where
    both are on one file system, else a copy; an upload to a remote one), fsync it and return
    its entry, its checksum read in chunks. The caller fsyncs the directory once all its files
    are written."""
    target = root / relative
    if exists(target):
        raise FileExistsError(f"{target} exists already")
    if isinstance(target, RemotePath):
        h, size = hashlib.sha256(), 0
        with open(source, "rb") as f, target.filesystem.open_output_stream(target.path) as out:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                out.write(chunk)
                size += len(chunk)
        source.unlink()
        return {"path": relative, "sha256": h.hexdigest(), "bytes": size}
    try:
        os.replace(source, target)
    except OSError:  # another file system
        shutil.copyfile(source, target)
        source.unlink()
    h = hashlib.sha256()
    with open(target, "rb+") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
        os.fsync(f.fileno())
        size = f.tell()
    return {"path": relative, "sha256": h.hexdigest(), "bytes": size}


def write_atomically(path: Location, data: bytes) -> None:
    """Write ``path`` so that it exists whole or not at all: a temporary file, fsync,
    rename over ``path``, fsync the directory. On a remote filesystem: one upload (an object
    store's PUT is visible whole when it completes, or not at all)."""
    if isinstance(path, RemotePath):
        with path.filesystem.open_output_stream(path.path) as out:
            out.write(data)
        return
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def resolve(root: Location, relative: str) -> Location:
    """``root/relative`` for a recorded path, refusing one that would leave ``root``."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts or "\\" in relative:
        raise FileProblem(f"it records the path {relative!r}, which is outside its directory")
    return root.joinpath(*parts) if isinstance(root, Path) else root / "/".join(parts)


def _expect(entry: Any) -> tuple[str, str, int]:
    try:
        path, digest, size = entry["path"], entry["sha256"], entry["bytes"]
    except (TypeError, KeyError) as e:
        raise FileProblem(f"a file entry is malformed: {entry!r}") from e
    if not isinstance(path, str) or not isinstance(digest, str) or not isinstance(size, int):
        raise FileProblem(f"a file entry is malformed: {entry!r}")
    return path, digest, size


def _check(relative: str, digest: str, size: int, actual_size: int, actual_digest: str | None) -> None:
    if actual_size != size:
        what = "truncated" if actual_size < size else "longer than written"
        raise FileProblem(f"file {relative!r} is {actual_size} bytes, not {size} ({what})")
    if actual_digest is not None and actual_digest != digest:
        raise FileProblem(f"file {relative!r} does not match its SHA-256 checksum (corrupted)")


def _stat_size(path: Location, relative: str) -> int:
    try:
        return file_size(path)
    except FileNotFoundError:
        raise FileProblem(f"file {relative!r} is missing") from None


def verify_file(root: Location, entry: Any) -> None:
    """Check a recorded file's size, then its checksum, reading it in chunks."""
    relative, digest, size = _expect(entry)
    path = resolve(root, relative)
    _check(relative, digest, size, _stat_size(path, relative), None)
    h = hashlib.sha256()
    with open_input(path) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    _check(relative, digest, size, size, h.hexdigest())


def read_verified(root: Location, entry: Any) -> bytes:
    """A recorded file's bytes, checked against its size and checksum as they are read."""
    relative, digest, size = _expect(entry)
    path = resolve(root, relative)
    try:
        data = read_bytes(path)
    except FileNotFoundError:
        raise FileProblem(f"file {relative!r} is missing") from None
    _check(relative, digest, size, len(data), hashlib.sha256(data).hexdigest())
    return data


def check_size(root: Location, entry: Any) -> Location:
    """A recorded file's path, after checking only that it exists with the recorded size."""
    relative, digest, size = _expect(entry)
    path = resolve(root, relative)
    _check(relative, digest, size, _stat_size(path, relative), None)
    return path


def remove_directory(path: Location) -> None:
    """Remove a directory tree, then make its removal durable in the parent."""
    if isinstance(path, RemotePath):
        if _info(path).type != pafs.FileType.NotFound:
            path.filesystem.delete_dir(path.path)
        return
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    if path.parent.exists():
        fsync_directory(path.parent)


# -- what the storage asks of a location, local or remote ------------------------------
def _info(path: RemotePath) -> pafs.FileInfo:
    return path.filesystem.get_file_info(path.path)


def exists(path: Location) -> bool:
    return _info(path).type != pafs.FileType.NotFound if isinstance(path, RemotePath) else path.exists()


def is_dir(path: Location) -> bool:
    return _info(path).type == pafs.FileType.Directory if isinstance(path, RemotePath) else path.is_dir()


def is_file(path: Location) -> bool:
    return _info(path).type == pafs.FileType.File if isinstance(path, RemotePath) else path.is_file()


def children(path: Location) -> list[tuple[Location, bool]]:
    """``(child, is a directory)`` for each entry of the directory ``path`` (none if it is missing)."""
    if isinstance(path, RemotePath):
        infos = path.filesystem.get_file_info(pafs.FileSelector(path.path, allow_not_found=True))
        return [(path / info.base_name, info.type == pafs.FileType.Directory) for info in infos]
    if not path.is_dir():
        return []
    return [(child, child.is_dir()) for child in path.iterdir()]


def file_size(path: Location) -> int:
    """The size of the file ``path``; FileNotFoundError if there is none."""
    if isinstance(path, RemotePath):
        info = _info(path)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(str(path))
        return info.size
    return path.stat().st_size


def open_input(path: Location) -> BinaryIO:
    """The file ``path`` opened for reading (seekable: Parquet reads its footer first)."""
    if isinstance(path, RemotePath):
        if _info(path).type != pafs.FileType.File:
            raise FileNotFoundError(str(path))
        return path.filesystem.open_input_file(path.path)
    return open(path, "rb")


def read_bytes(path: Location) -> bytes:
    if isinstance(path, RemotePath):
        with open_input(path) as f:
            return f.read()
    return path.read_bytes()


def remove_file(path: Location) -> None:
    """Remove the file ``path``, if there is one."""
    if isinstance(path, RemotePath):
        if _info(path).type == pafs.FileType.File:
            path.filesystem.delete_file(path.path)
        return
    path.unlink(missing_ok=True)

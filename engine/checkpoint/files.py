"""Files that survive a crash, and the checks that prove a file is the one that was written.

A file is written whole, flushed and fsynced before anyone records it; a directory
is fsynced so that the names in it survive too. Presence proves nothing (see
``shared/reference/measured-here.md``): a reader checks every file against the
size and SHA-256 recorded for it, and learns of a file only from metadata that
was written last (``write_atomically``).

A file entry is JSON-able: ``{"path": relative POSIX path, "sha256": hex, "bytes": n}``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

_CHUNK = 1 << 20


class FileProblem(Exception):
    """Why a recorded file cannot be trusted: missing, wrong size, wrong checksum."""


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_directories(path: Path) -> list[Path]:
    """Create ``path`` and its missing parents; return the directories whose entries must
    be fsynced for them to survive a crash (the parent of each one created)."""
    missing = []
    ancestor = path
    while not ancestor.exists():
        missing.append(ancestor)
        ancestor = ancestor.parent
    path.mkdir(parents=True, exist_ok=True)
    return [created.parent for created in reversed(missing)]


def write_file(root: Path, relative: str, data: Any) -> dict[str, Any]:
    """Write ``data`` (bytes or any buffer) to a new file ``root/relative`` and fsync it.

    Returns its entry. The caller fsyncs the directory once all its files are written.
    """
    with open(root / relative, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    view = memoryview(data)
    return {"path": relative, "sha256": hashlib.sha256(view).hexdigest(), "bytes": view.nbytes}


def move_file(root: Path, relative: str, source: Path) -> dict[str, Any]:
    """Move the finished file ``source`` to the new file ``root/relative`` (a rename where both
    are on one file system, else a copy), fsync it and return its entry, its checksum read in
    chunks. The caller fsyncs the directory once all its files are written."""
    target = root / relative
    if target.exists():
        raise FileExistsError(f"{target} exists already")
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


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``path`` so that it exists whole or not at all: a temporary file, fsync,
    rename over ``path``, fsync the directory."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    fsync_directory(path.parent)


def resolve(root: Path, relative: str) -> Path:
    """``root/relative`` for a recorded path, refusing one that would leave ``root``."""
    parts = PurePosixPath(relative).parts
    if not parts or PurePosixPath(relative).is_absolute() or ".." in parts or "\\" in relative:
        raise FileProblem(f"it records the path {relative!r}, which is outside its directory")
    return root.joinpath(*parts)


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


def _stat_size(path: Path, relative: str) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        raise FileProblem(f"file {relative!r} is missing") from None


def verify_file(root: Path, entry: Any) -> None:
    """Check a recorded file's size, then its checksum, reading it in chunks."""
    relative, digest, size = _expect(entry)
    path = resolve(root, relative)
    _check(relative, digest, size, _stat_size(path, relative), None)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    _check(relative, digest, size, size, h.hexdigest())


def read_verified(root: Path, entry: Any) -> bytes:
    """A recorded file's bytes, checked against its size and checksum as they are read."""
    relative, digest, size = _expect(entry)
    path = resolve(root, relative)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise FileProblem(f"file {relative!r} is missing") from None
    _check(relative, digest, size, len(data), hashlib.sha256(data).hexdigest())
    return data


def check_size(root: Path, entry: Any) -> Path:
    """A recorded file's path, after checking only that it exists with the recorded size."""
    relative, digest, size = _expect(entry)
    path = resolve(root, relative)
    _check(relative, digest, size, _stat_size(path, relative), None)
    return path


def remove_directory(path: Path) -> None:
    """Remove a directory tree, then make its removal durable in the parent."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    if path.parent.exists():
        fsync_directory(path.parent)

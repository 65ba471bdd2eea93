"""Where checkpoints and savepoints live: a directory of this machine, or any filesystem
``pyarrow.fs`` opens from a URI.

A location is written as a plain path (``.weir/job/checkpoints``, ``/mnt/shared/chk``) or a
URI (``file:///mnt/shared/chk``, ``s3://bucket/prefix``, ``gs://...``, ``hdfs://...``: any
scheme ``pyarrow.fs.FileSystem.from_uri`` knows). ``parse_location`` turns it into:

- a ``pathlib.Path`` when the filesystem is this machine's (plain paths and ``file://``:
  pyarrow's ``LocalFileSystem``); the files are then written with ``os`` calls, because
  a local checkpoint is made durable by ``fsync``, which pyarrow does not offer;
- a ``RemotePath`` otherwise: a filesystem and a path on it, which every reader and writer
  in ``files.py`` uses through ``pyarrow.fs``. Its ``uri`` is what a worker on another node
  is given to reach the same place (it pickles as that URI, too).

Options of the filesystem go in the URI's query, as pyarrow reads them, e.g. an S3 server
of one's own: ``s3://bucket/prefix?endpoint_override=127.0.0.1:9000&scheme=http``.
Credentials are better left to the environment (``AWS_ACCESS_KEY_ID``, ...) than put in
the URI's user info (``s3://KEY:SECRET@bucket/...``), since a location is shown in messages
as written.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import pyarrow as pa
import pyarrow.fs as pafs

from weir.engine.errors import EngineError


class RemotePath:
    """A path on a filesystem that is not this machine's, e.g. ``s3://bucket/prefix/chk-3``.

    It has what the checkpoint code uses of ``pathlib``: ``/``, ``name``, ``parent``, ``str``."""

    __slots__ = ("filesystem", "_root_uri", "_root", "_parts", "_query")

    def __init__(self, filesystem: pafs.FileSystem, root_uri: str, root: str, query: str = "",
                 parts: tuple[str, ...] = ()):
        self.filesystem = filesystem
        self._root_uri, self._root, self._query, self._parts = root_uri.rstrip("/"), root.rstrip("/"), query, parts

    @property
    def path(self) -> str:
        """The path on ``filesystem`` (for pyarrow calls)."""
        return "/".join([self._root, *self._parts])

    @property
    def uri(self) -> str:
        """The URI that opens this path again, anywhere (its query keeps the filesystem's options)."""
        return "/".join([self._root_uri, *self._parts]) + (f"?{self._query}" if self._query else "")

    def __truediv__(self, name: str) -> "RemotePath":
        parts = tuple(p for p in str(name).split("/") if p)
        return RemotePath(self.filesystem, self._root_uri, self._root, self._query, self._parts + parts)

    @property
    def name(self) -> str:
        return self._parts[-1] if self._parts else self._root.rsplit("/", 1)[-1]

    @property
    def parent(self) -> "RemotePath":
        if self._parts:
            return RemotePath(self.filesystem, self._root_uri, self._root, self._query, self._parts[:-1])
        root_uri, root = self._root_uri.rsplit("/", 1)[0], self._root.rsplit("/", 1)[0]
        return RemotePath(self.filesystem, root_uri, root, self._query)

    def __str__(self) -> str:
        return self.uri

    def __repr__(self) -> str:
        return f"RemotePath({self.uri!r})"

    def __fspath__(self) -> str:  # so that a stray open() or Path() fails saying why, not silently
        raise TypeError(f"{self.uri} is not on this machine's filesystem")

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RemotePath) and (self.uri, self.path) == (other.uri, other.path)

    def __hash__(self) -> int:
        return hash(self.uri)

    def __reduce__(self):
        return parse_location, (self.uri,)


#: A checkpoint location: a local directory or a path on a remote filesystem.
Location = Union[Path, RemotePath]


#: URI schemes and the pyarrow.fs filesystem each needs (``FileSystem.from_uri``).
SCHEMES = {"file": "LocalFileSystem", "local": "LocalFileSystem", "s3": "S3FileSystem", "gs": "GcsFileSystem",
           "gcs": "GcsFileSystem", "hdfs": "HadoopFileSystem", "viewfs": "HadoopFileSystem",
           "abfs": "AzureFileSystem", "abfss": "AzureFileSystem"}


def _has_filesystem(name: str) -> bool:
    try:
        getattr(pafs, name)  # (pyarrow.fs raises ImportError for one it was built without)
    except (AttributeError, ImportError):
        return False
    return True


def location_problem(text: str) -> str | None:
    """What is wrong with a location as written, found without reaching its filesystem (a setting's
    check), or None: an unknown scheme, a filesystem this pyarrow lacks, ``s3:/x`` for ``s3://x``."""
    text = text.strip()
    if not text:
        return "a directory or a filesystem URI such as 's3://bucket/prefix', not empty"
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, colon, rest = text.partition(":")
        if colon and scheme.lower() in SCHEMES:
            return f"a URI with '//' after its scheme ('{scheme}://{rest.lstrip('/')}')"
        return None
    scheme = scheme.lower()
    if scheme not in SCHEMES:
        return (f"a directory or a URI of a filesystem pyarrow opens ({', '.join(s + '://' for s in SCHEMES)}); "
                f"'{scheme}://' is none of them")
    if not _has_filesystem(SCHEMES[scheme]):
        return f"a URI of a filesystem this pyarrow has: it was built without {SCHEMES[scheme]} ('{scheme}://')"
    if not rest.partition("?")[0].strip("/"):
        return f"a URI naming a place ('{scheme}://bucket/prefix'), not the bare '{scheme}://'"
    return None


def is_uri(text: str) -> bool:
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum() and len(scheme) > 1


def parse_location(value: "str | Path | RemotePath", key: str | None = None) -> Location:
    """A location from a plain path or a URI; ``key`` (a setting's name, an option) names it in errors."""
    if isinstance(value, (Path, RemotePath)):
        return value
    text = str(value).strip()
    if not text:
        raise EngineError(f"{key or 'a checkpoint location'} is empty",
                          hint="give a directory or a filesystem URI such as s3://bucket/prefix")
    problem = location_problem(text)
    if problem is not None:
        raise EngineError(f"{key or 'a checkpoint location'} must be {problem}, not '{text}'",
                          hint="use a directory, file:///path, or e.g. s3://bucket/prefix (options in the query: "
                               "s3://bucket/prefix?endpoint_override=host:port&scheme=http)")
    if not is_uri(text):
        return Path(text)
    try:
        filesystem, path = pafs.FileSystem.from_uri(text)
    except (pa.ArrowException, OSError, ValueError) as error:
        scheme = text.partition("://")[0]
        what = f"{key} = '{text}'" if key else f"'{text}'"
        raise EngineError(
            f"{what} is not a filesystem weir can open: {str(error).splitlines()[0]}",
            hint=f"use a directory, file:///path, or a URI of a filesystem pyarrow supports (s3://bucket/prefix, "
                 f"gs://bucket/prefix, hdfs://host/path); a '{scheme}' URI needs pyarrow built with that "
                 "filesystem, and its options go in the URI's query (s3://bucket/p?endpoint_override=host:port"
                 "&scheme=http)",
        ) from None
    if isinstance(filesystem, pafs.LocalFileSystem):
        return Path(path)
    base, _, query = text.partition("?")
    return RemotePath(filesystem, base, path, query)


def same_place(a: Location, b: Location) -> bool:
    """Whether two locations name one directory (URIs compared by filesystem and path, their
    options aside)."""
    if isinstance(a, RemotePath) and isinstance(b, RemotePath):
        return a.filesystem.type_name == b.filesystem.type_name and a.path.strip("/") == b.path.strip("/")
    if isinstance(a, RemotePath) or isinstance(b, RemotePath):
        return False
    return Path(a).resolve() == Path(b).resolve()


def location_text(location: Location) -> str:
    """What a process on another machine (a worker actor) is given to reach ``location``: an
    absolute path (meaningful where the directory is shared) or the URI."""
    return location.uri if isinstance(location, RemotePath) else str(Path(location).resolve())

"""The ``_metadata`` file: written last, it is what makes a checkpoint exist.

It is JSON::

    {"format": "weir-checkpoint", "format_version": 1,
     "kind": "checkpoint" | "savepoint", "checkpoint_id": 7,
     "created_at": "2025-01-01T12:00:00.000000+00:00",
     "size_bytes": <sum of the state files' sizes>,
     "operators": {operator_id: {"<subtask>": handle, ...}, ...},
     "metadata": <the coordinator's dict: source offsets, sink handles, graph fingerprint, ...>,
     "sha256": <checksum of everything else>}

``sha256`` is taken over the record's canonical JSON (sorted keys, no spaces), so
that a flipped byte that still parses — a source offset off by one — is caught,
not restored. Handles are those of ``state_files``.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

FORMAT = "weir-checkpoint"
FORMAT_VERSION = 1
METADATA_FILE = "_metadata"
KINDS = ("checkpoint", "savepoint")


class MetadataProblem(Exception):
    """Why a ``_metadata`` file cannot be used."""


@dataclass(frozen=True)
class CheckpointInfo:
    """A completed checkpoint or savepoint, as its ``_metadata`` describes it."""

    id: int
    kind: str
    path: Any  # a Location: pathlib.Path, or location.RemotePath
    created_at: datetime
    size_bytes: int


def _canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def encode_metadata(
    *,
    checkpoint_id: int,
    kind: str,
    operators: dict[str, dict[str, Any]],
    metadata: dict[str, Any],
    created_at: datetime,
) -> bytes:
    size = sum(f["bytes"] for subtasks in operators.values() for h in subtasks.values() for f in h["files"])
    record = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": kind,
        "checkpoint_id": checkpoint_id,
        "created_at": created_at.isoformat(),
        "size_bytes": size,
        "operators": operators,
        "metadata": metadata,
    }
    # Through JSON once, so that the checksum is over what a reader will parse
    # (integer keys become strings, tuples lists).
    record = json.loads(json.dumps(record, allow_nan=False))
    record["sha256"] = hashlib.sha256(_canonical(record)).hexdigest()
    return json.dumps(record, indent=1).encode()


def decode_metadata(data: bytes) -> dict[str, Any]:
    """The record of a ``_metadata`` file, checked; raises ``MetadataProblem``."""
    try:
        record = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise MetadataProblem(f"_metadata is not valid JSON ({e})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise MetadataProblem("_metadata is not a weir checkpoint's metadata")
    version = record.get("format_version")
    if version != FORMAT_VERSION:
        raise MetadataProblem(
            f"_metadata has format version {version!r}; this weir reads version {FORMAT_VERSION}"
        )
    digest = record.pop("sha256", None)
    if digest != hashlib.sha256(_canonical(record)).hexdigest():
        raise MetadataProblem("_metadata does not match its SHA-256 checksum (corrupted)")
    _check_fields(record)
    return record


def _check_fields(record: dict[str, Any]) -> None:
    if record.get("kind") not in KINDS:
        raise MetadataProblem(f"_metadata has an unknown kind {record.get('kind')!r}")
    for name, expected in (("checkpoint_id", int), ("size_bytes", int), ("created_at", str),
                           ("operators", dict), ("metadata", dict)):
        if not isinstance(record.get(name), expected):
            raise MetadataProblem(f"_metadata lacks a valid {name!r}")
    try:
        datetime.fromisoformat(record["created_at"])
    except ValueError:
        raise MetadataProblem("_metadata has an invalid 'created_at'") from None
    for operator_id, subtasks in record["operators"].items():
        if not isinstance(subtasks, dict) or not all(
            s.isdigit() and isinstance(h, dict) and isinstance(h.get("files"), list)
            and isinstance(h.get("state"), str) and isinstance(h.get("tables", {}), dict)
            for s, h in subtasks.items()
        ):
            raise MetadataProblem(f"_metadata has a malformed entry for operator {operator_id!r}")


def info_of(record: dict[str, Any], path: Any) -> CheckpointInfo:
    return CheckpointInfo(
        id=record["checkpoint_id"],
        kind=record["kind"],
        path=path,
        created_at=datetime.fromisoformat(record["created_at"]),
        size_bytes=record["size_bytes"],
    )


def now() -> datetime:
    return datetime.now(timezone.utc)
